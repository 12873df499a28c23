import { createCipheriv, createDecipheriv, createHmac, randomFillSync } from 'node:crypto';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { LicenseServerError } from '../errors.js';
import { hasLoneSurrogate } from '../validate.js';
import { decodeBase64Strict, encodeBase64 } from './base64.js';

/**
 * Hardware binding of a license's decryption key (docs/offline-license-format.md, section
 * "Hardware binding"): the key is sealed with AES-256-GCM under
 * HKDF-SHA256(IKM = hardware ID, salt = license id, info = BINDING_INFO), all UTF-8.
 */
export const BINDING_INFO = 'license-server/v1/offline-decryption-key';
export const NONCE_LENGTH = 12;
export const TAG_LENGTH = 16;
export const DECRYPTION_KEY_LENGTH = 32;
export const SEALED_KEY_LENGTH = NONCE_LENGTH + DECRYPTION_KEY_LENGTH + TAG_LENGTH;
export const MAX_HARDWARE_ID_LENGTH = 256;

const utf8 = new TextEncoder();

/** RFC 5869 HKDF with SHA-256, 32 bytes out. */
export function deriveBindingKey(hardwareId: string, licenseId: string): Uint8Array {
  return hkdf(sha256, utf8.encode(hardwareId), utf8.encode(licenseId), utf8.encode(BINDING_INFO), 32);
}

// info || 0x01: HKDF's one expansion block when the output is one hash long.
const EXPAND_INPUT = Buffer.concat([utf8.encode(BINDING_INFO), Buffer.of(1)]);

/**
 * deriveBindingKey through node:crypto's HMAC: PRK = HMAC(salt, IKM), OKM = HMAC(PRK, info
 * || 0x01), a third of the JavaScript HKDF's time. The server seals on every bound checkout
 * and grace token, where that was the largest cost after the database; the client library
 * opens a key once per file and keeps the JavaScript HKDF (and the dependencies it declares).
 * A test holds the two equal.
 */
export function deriveBindingKeyForSealing(hardwareId: string, licenseId: string): Buffer {
  const prk = createHmac('sha256', utf8.encode(licenseId)).update(utf8.encode(hardwareId)).digest();
  const okm = createHmac('sha256', prk).update(EXPAND_INPUT).digest();
  prk.fill(0);
  return okm;
}

// One CSPRNG call per 4 KiB instead of one per nonce: a small randomBytes() costs as much as
// the AES-GCM around it. Every byte is handed out once.
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomNonce(): Uint8Array {
  if (poolOffset + NONCE_LENGTH > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const nonce = Uint8Array.prototype.slice.call(pool, poolOffset, poolOffset + NONCE_LENGTH);
  poolOffset += NONCE_LENGTH;
  return nonce;
}

/** Base64 of nonce || ciphertext || tag. The nonce is random unless a test fixes it. */
export function sealDecryptionKey(
  decryptionKey: Uint8Array,
  hardwareId: string,
  licenseId: string,
  nonce: Uint8Array = randomNonce(),
): string {
  if (decryptionKey.length !== DECRYPTION_KEY_LENGTH) throw new TypeError('decryption key: expected 32 bytes');
  if (nonce.length !== NONCE_LENGTH) throw new TypeError('nonce: expected 12 bytes');
  const bindingKey = deriveBindingKeyForSealing(hardwareId, licenseId);
  const cipher = createCipheriv('aes-256-gcm', bindingKey, nonce);
  bindingKey.fill(0);
  const ciphertext = Buffer.concat([cipher.update(decryptionKey), cipher.final()]);
  return encodeBase64(Buffer.concat([nonce, ciphertext, cipher.getAuthTag()]));
}

/**
 * Opens a sealed key with this machine's hardware ID. Any failure, including a different
 * hardware ID, is DECRYPTION_FAILED: GCM cannot tell a wrong key from tampering.
 */
export function unsealDecryptionKey(encryptedKey: string, hardwareId: string, licenseId: string): Uint8Array {
  const sealed = decodeBase64Strict(encryptedKey);
  if (!sealed || sealed.length !== SEALED_KEY_LENGTH) {
    throw new LicenseServerError('DECRYPTION_FAILED', 'failed to decrypt license key: the sealed key has the wrong length');
  }
  const nonce = sealed.subarray(0, NONCE_LENGTH);
  const ciphertext = sealed.subarray(NONCE_LENGTH, NONCE_LENGTH + DECRYPTION_KEY_LENGTH);
  const tag = sealed.subarray(NONCE_LENGTH + DECRYPTION_KEY_LENGTH);
  try {
    const decipher = createDecipheriv('aes-256-gcm', deriveBindingKey(hardwareId, licenseId), nonce);
    decipher.setAuthTag(tag);
    // 32 bytes in one update: nothing is used before final() has checked the tag.
    const plaintext = Buffer.concat([decipher.update(ciphertext), decipher.final()]);
    return new Uint8Array(plaintext);
  } catch {
    throw new LicenseServerError('DECRYPTION_FAILED', 'failed to decrypt license key');
  }
}

/**
 * A hardware ID as accepted at checkout, validation and verification: well-formed Unicode
 * without control characters, normalised to NFC (so the composed and decomposed forms of
 * "é" name one machine and derive one binding key), then 1-256 bytes of UTF-8.
 *
 * The length is checked once, on the NFC form, with one message (docs/client.md lists it).
 * A string longer than 256 UTF-16 code units is not refused before normalising: NFC can
 * shorten it ("u" U+0308 U+0304 is three code units, its NFC U+01D6 two bytes).
 */
export function parseHardwareId(value: unknown, field = 'hardware_id'): string {
  if (typeof value !== 'string') {
    throw new LicenseServerError('INVALID_HARDWARE_ID', `${field} must be a string, got ${value === null ? 'null' : typeof value}`);
  }
  if (value.length === 0) throw new LicenseServerError('INVALID_HARDWARE_ID', `${field} must not be empty`);
  if (/[\u0000-\u001f\u007f-\u009f]/.test(value)) {
    throw new LicenseServerError('INVALID_HARDWARE_ID', `${field} must not contain control characters`);
  }
  if (hasLoneSurrogate(value)) {
    throw new LicenseServerError('INVALID_HARDWARE_ID', `${field} must be well-formed Unicode text`);
  }
  const normalised = value.normalize('NFC');
  const bytes = Buffer.byteLength(normalised, 'utf8');
  if (bytes > MAX_HARDWARE_ID_LENGTH) {
    throw new LicenseServerError('INVALID_HARDWARE_ID', `${field} must be at most ${MAX_HARDWARE_ID_LENGTH} bytes of UTF-8, got ${bytes}`);
  }
  return normalised;
}
