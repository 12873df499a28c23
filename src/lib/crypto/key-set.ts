import { createHash } from 'node:crypto';
import { LicenseServerError } from '../errors.js';
import { publicKeyFromPem } from './ed25519-pem.js';

/**
 * Verification key sets: the public keys a verifier trusts, each known by its key id.
 * A server that rotates its signing key keeps the old public keys verifying until they are
 * retired, and a vendor ships a client with the current key and the next one; so every
 * verifier takes a set, not one key. Free of server imports: the client library uses it.
 */
export interface VerificationKey {
  /** keyIdOf(publicKey): derived from the key, so a verifier given only PEM knows it too. */
  readonly keyId: string;
  readonly publicKey: Uint8Array;
}

export type KeySet = readonly VerificationKey[];

/** One key (32 raw bytes, or PEM holding one or more blocks) or a list of them. */
export type KeySetInput = Uint8Array | string | readonly (Uint8Array | string)[];

/** A key id: the first 16 hex digits (8 bytes) of SHA-256 of the 32 raw public key bytes. */
export const KEY_ID_PATTERN = /^[0-9a-f]{16}$/;

export function keyIdOf(publicKey: Uint8Array): string {
  return createHash('sha256').update(publicKey).digest('hex').slice(0, 16);
}

export function verificationKey(publicKey: Uint8Array): VerificationKey {
  return { keyId: keyIdOf(publicKey), publicKey };
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END ([A-Z0-9 ]+)-----/g;

function invalid(message: string): never {
  throw new LicenseServerError('PUBLIC_KEY_INVALID', message);
}

/**
 * Every PEM block of `text` as an Ed25519 public key. Text between blocks (comments, the
 * key ids `signing-key show --all` writes) is ignored; a block that is not a public key is
 * refused by its number, and a private key is named as such so that nobody ships one.
 */
function keysOfPem(text: string, source: string): VerificationKey[] {
  const keys: VerificationKey[] = [];
  let block = 0;
  for (const match of text.matchAll(BLOCK)) {
    block += 1;
    const [whole, label, , endLabel] = match as unknown as [string, string, string, string];
    if (label.includes('PRIVATE KEY')) {
      invalid(`${source}: block ${block} is a private key ("${label}"); a key set holds public keys only (\`signing-key show --all\` prints one)`);
    }
    if (endLabel !== label) invalid(`${source}: block ${block} begins "${label}" but ends "${endLabel}"`);
    if (label !== 'PUBLIC KEY') invalid(`${source}: block ${block} is "${label}", not an Ed25519 "PUBLIC KEY"`);
    try {
      keys.push(verificationKey(publicKeyFromPem(whole)));
    } catch (error) {
      invalid(`${source}: block ${block} is not a well-formed Ed25519 public key (${(error as Error).message})`);
    }
  }
  // A block cut short (a truncated file) must not silently drop the key it held.
  if (text.replace(BLOCK, '').includes('-----BEGIN')) invalid(`${source}: block ${block + 1} is not closed (is the file cut short?)`);
  if (block === 0) invalid(`${source}: no PEM "PUBLIC KEY" block`);
  return keys;
}

/**
 * The key set of `input`, in the order given. A key given twice is refused rather than
 * dropped: a set file that repeats a block was put together by mistake, and may be missing
 * the key meant to be there.
 */
export function parseKeySet(input: KeySetInput, source = 'public key'): KeySet {
  const parts = typeof input === 'string' || input instanceof Uint8Array ? [input] : input;
  if (parts.length === 0) invalid(`${source}: no keys given`);
  const keys: VerificationKey[] = [];
  parts.forEach((part, index) => {
    const where = parts.length > 1 ? `${source} ${index + 1}` : source;
    if (typeof part === 'string') {
      keys.push(...keysOfPem(part, where));
    } else if (part instanceof Uint8Array && part.length === 32) {
      keys.push(verificationKey(Uint8Array.from(part)));
    } else {
      invalid(`${where}: expected 32 raw Ed25519 bytes or a PEM "PUBLIC KEY"`);
    }
  });
  const seen = new Set<string>();
  for (const key of keys) {
    if (seen.has(key.keyId)) invalid(`${source}: key ${key.keyId} appears twice`);
    seen.add(key.keyId);
  }
  return keys;
}

/**
 * The keys to try for an item that names `keyId` (or names none). A named key must be in
 * the set; an item without a key id (files and tokens from before key ids) is tried against
 * every key, which is as strong: a signature verifies under one key only.
 */
export function keysFor(set: KeySet, keyId: string | undefined): { readonly keys: KeySet; readonly unknown?: string } {
  if (keyId === undefined || !KEY_ID_PATTERN.test(keyId)) return { keys: set };
  const key = set.find((candidate) => candidate.keyId === keyId);
  return key ? { keys: [key] } : { keys: [], unknown: keyId };
}

/** "key 0123... is not in the key set (it holds 0a1b..., 2c3d...)" for error messages. */
export function describeUnknownKey(keyId: string, set: KeySet): string {
  const known = set.map((key) => key.keyId).join(', ');
  return `it is signed by key ${keyId}, which is not in the key set given (${set.length === 1 ? 'key' : 'keys'} ${known})`;
}
