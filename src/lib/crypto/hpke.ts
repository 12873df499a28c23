import { gcm } from '@noble/ciphers/aes.js';
import { x25519 } from '@noble/curves/ed25519.js';
import { expand, extract } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';

/**
 * HPKE (RFC 9180), mode_base, for one suite only:
 *
 *   KEM  DHKEM(X25519, HKDF-SHA256)  kem_id  0x0020   (section 4.1, 7.1)
 *   KDF  HKDF-SHA256                 kdf_id  0x0001   (section 7.2)
 *   AEAD AES-256-GCM                 aead_id 0x0002   (section 7.3)
 *
 * and only the single-shot API of section 6.1 (SealBase/OpenBase: one message, sequence
 * number 0, so the AEAD nonce is base_nonce itself). The names follow the RFC. Sizes:
 * Nenc = Npk = Nsk = Nsecret = 32, Nk = 32, Nn = 12, Nt = 16, Nh = 32.
 *
 * test/vectors/hpke-rfc9180.json holds the RFC's vector for this suite; test/lib/crypto/hpke.test.ts
 * checks every intermediate value of it.
 */
export const KEM_ID = 0x0020;
export const KDF_ID = 0x0001;
export const AEAD_ID = 0x0002;
export const MODE_BASE = 0x00;
export const N_ENC = 32;
export const N_PK = 32;
export const N_SK = 32;
export const N_K = 32;
export const N_N = 12;
export const N_T = 16;
const N_SECRET = 32;
const N_H = 32;

const ascii = (text: string): Uint8Array => new TextEncoder().encode(text);
const EMPTY = new Uint8Array(0);

function concat(...parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** I2OSP(n, w): n as w big-endian bytes (RFC 8017 section 4.1). */
function i2osp(n: number, w: number): Uint8Array {
  const out = new Uint8Array(w);
  for (let i = w - 1, rest = n; i >= 0; i -= 1, rest = Math.floor(rest / 256)) out[i] = rest % 256;
  return out;
}

const HPKE_V1 = ascii('HPKE-v1');
/** suite_id of the KEM (section 4.1): "KEM" || I2OSP(kem_id, 2). */
const KEM_SUITE_ID = concat(ascii('KEM'), i2osp(KEM_ID, 2));
/** suite_id of the key schedule (section 5.1): "HPKE" || kem_id || kdf_id || aead_id. */
const HPKE_SUITE_ID = concat(ascii('HPKE'), i2osp(KEM_ID, 2), i2osp(KDF_ID, 2), i2osp(AEAD_ID, 2));

/** Section 4: LabeledExtract(salt, label, ikm) = Extract(salt, "HPKE-v1" || suite_id || label || ikm). */
function labeledExtract(suiteId: Uint8Array, salt: Uint8Array, label: string, ikm: Uint8Array): Uint8Array {
  // An empty salt is HashLen zero bytes (RFC 5869 section 2.2); HMAC pads either to the same key.
  return extract(sha256, concat(HPKE_V1, suiteId, ascii(label), ikm), salt);
}

/** Section 4: LabeledExpand(prk, label, info, L) = Expand(prk, I2OSP(L, 2) || "HPKE-v1" || suite_id || label || info, L). */
function labeledExpand(suiteId: Uint8Array, prk: Uint8Array, label: string, info: Uint8Array, length: number): Uint8Array {
  return expand(sha256, prk, concat(i2osp(length, 2), HPKE_V1, suiteId, ascii(label), info), length);
}

function checkLength(name: string, value: Uint8Array, length: number): void {
  if (!(value instanceof Uint8Array) || value.length !== length) throw new TypeError(`hpke: ${name} must be ${length} bytes`);
}

/**
 * DH(sk, pk) of section 7.1.1 with X25519 (RFC 7748). An all-zero output (pk of small
 * order) is refused, as section 7.1.4 requires.
 */
function dh(sk: Uint8Array, pk: Uint8Array): Uint8Array {
  let shared: Uint8Array;
  try {
    shared = x25519.getSharedSecret(sk, pk);
  } catch {
    throw new Error('hpke: the X25519 shared secret is all zeros (a public key of small order)');
  }
  if (shared.every((byte) => byte === 0)) throw new Error('hpke: the X25519 shared secret is all zeros (a public key of small order)');
  return shared;
}

/** Section 4.1: ExtractAndExpand(dh, kem_context). */
function extractAndExpand(dhOutput: Uint8Array, kemContext: Uint8Array): Uint8Array {
  const eaePrk = labeledExtract(KEM_SUITE_ID, EMPTY, 'eae_prk', dhOutput);
  return labeledExpand(KEM_SUITE_ID, eaePrk, 'shared_secret', kemContext, N_SECRET);
}

/** X25519 public key of a 32-byte private key (SerializePublicKey is the identity). */
export function publicKeyOf(privateKey: Uint8Array): Uint8Array {
  checkLength('private key', privateKey, N_SK);
  return x25519.getPublicKey(privateKey);
}

/** A fresh key pair from the CSPRNG (GenerateKeyPair of section 4). */
export function generateKeyPair(): { readonly privateKey: Uint8Array; readonly publicKey: Uint8Array } {
  const privateKey = x25519.utils.randomSecretKey();
  return { privateKey, publicKey: x25519.getPublicKey(privateKey) };
}

/**
 * Section 4.1 Encap(pkR). `ephemeralPrivateKey` is for the known-answer test only (the RFC's
 * skEm); otherwise the ephemeral key is fresh from the CSPRNG, as it must be.
 */
export function encap(pkR: Uint8Array, ephemeralPrivateKey?: Uint8Array): { readonly sharedSecret: Uint8Array; readonly enc: Uint8Array } {
  checkLength('recipient public key', pkR, N_PK);
  const skE = ephemeralPrivateKey ?? x25519.utils.randomSecretKey();
  checkLength('ephemeral private key', skE, N_SK);
  const enc = x25519.getPublicKey(skE);
  const sharedSecret = extractAndExpand(dh(skE, pkR), concat(enc, pkR));
  return { sharedSecret, enc };
}

/** Section 4.1 Decap(enc, skR). */
export function decap(enc: Uint8Array, skR: Uint8Array): Uint8Array {
  checkLength('enc', enc, N_ENC);
  checkLength('recipient private key', skR, N_SK);
  return extractAndExpand(dh(skR, enc), concat(enc, x25519.getPublicKey(skR)));
}

export interface KeySchedule {
  readonly keyScheduleContext: Uint8Array;
  readonly secret: Uint8Array;
  readonly key: Uint8Array;
  readonly baseNonce: Uint8Array;
  readonly exporterSecret: Uint8Array;
}

/** Section 5.1 KeySchedule for mode_base (psk = psk_id = ""). */
export function keyScheduleBase(sharedSecret: Uint8Array, info: Uint8Array): KeySchedule {
  const pskIdHash = labeledExtract(HPKE_SUITE_ID, EMPTY, 'psk_id_hash', EMPTY);
  const infoHash = labeledExtract(HPKE_SUITE_ID, EMPTY, 'info_hash', info);
  const keyScheduleContext = concat(Uint8Array.of(MODE_BASE), pskIdHash, infoHash);
  const secret = labeledExtract(HPKE_SUITE_ID, sharedSecret, 'secret', EMPTY);
  return {
    keyScheduleContext,
    secret,
    key: labeledExpand(HPKE_SUITE_ID, secret, 'key', keyScheduleContext, N_K),
    baseNonce: labeledExpand(HPKE_SUITE_ID, secret, 'base_nonce', keyScheduleContext, N_N),
    exporterSecret: labeledExpand(HPKE_SUITE_ID, secret, 'exp', keyScheduleContext, N_H),
  };
}

/**
 * Section 6.1 SealBase(pkR, info, aad, pt): returns enc and the ciphertext (pt || 16-byte
 * tag). One message per context: its nonce is base_nonce XOR I2OSP(0, Nn) = base_nonce.
 */
export function sealBase(
  pkR: Uint8Array,
  info: Uint8Array,
  aad: Uint8Array,
  plaintext: Uint8Array,
  ephemeralPrivateKey?: Uint8Array,
): { readonly enc: Uint8Array; readonly ciphertext: Uint8Array } {
  const { sharedSecret, enc } = encap(pkR, ephemeralPrivateKey);
  const { key, baseNonce } = keyScheduleBase(sharedSecret, info);
  return { enc, ciphertext: gcm(key, baseNonce, aad).encrypt(plaintext) };
}

/**
 * Section 6.1 OpenBase(enc, skR, info, aad, ct). Throws when the tag does not verify (a
 * wrong private key, info or aad, or a changed enc or ciphertext: GCM cannot tell which).
 */
export function openBase(enc: Uint8Array, skR: Uint8Array, info: Uint8Array, aad: Uint8Array, ciphertext: Uint8Array): Uint8Array {
  if (ciphertext.length < N_T) throw new Error('hpke: the ciphertext is shorter than its tag');
  const { key, baseNonce } = keyScheduleBase(decap(enc, skR), info);
  try {
    return gcm(key, baseNonce, aad).decrypt(ciphertext);
  } catch {
    throw new Error('hpke: open failed (the tag does not verify)');
  }
}
