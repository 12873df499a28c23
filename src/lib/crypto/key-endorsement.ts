import { createHash } from 'node:crypto';
import { verifyEd25519 } from '../offline/ed25519.js';
import { keyIdOf, type KeySet, type VerificationKey } from './key-set.js';

/**
 * Key endorsements (docs/public-keys.md): a signing key vouches for another key of the same
 * server by signing a fixed statement over it. A client that trusts the signer may then take
 * the endorsed key from a key set it fetched; nothing else in a fetched set is taken. Free of
 * server imports: the client library applies the trust rule here.
 */
export const ENDORSEMENT_PREFIX = 'license-server key endorsement v1\n';

/** An endorsement as published: which key signed, and its 64-byte Ed25519 signature. */
export interface Endorsement {
  readonly signerKeyId: string;
  readonly signature: Uint8Array;
}

/** A key offered by a fetched key set, with the endorsements published for it. */
export interface OfferedKey extends VerificationKey {
  readonly endorsements: readonly Endorsement[];
}

/** A key the application allows without an endorsement: its key id and SHA-256 fingerprint (hex). */
export interface AllowedKey {
  readonly keyId: string;
  readonly fingerprint: string;
}

/**
 * The signed bytes: the prefix, the key id, a line feed, and the unpadded base64url of the
 * 32 raw public key bytes (RFC 4648 section 5), in UTF-8 (all of it ASCII). No trailing newline.
 */
export function endorsementStatement(publicKey: Uint8Array): Uint8Array {
  if (publicKey.length !== 32) throw new RangeError(`endorsementStatement: expected a 32-byte Ed25519 public key, got ${publicKey.length} bytes`);
  return Buffer.from(`${ENDORSEMENT_PREFIX}${keyIdOf(publicKey)}\n${Buffer.from(publicKey).toString('base64url')}`, 'utf8');
}

/** Whether `signature` is `signer`'s endorsement of `subject` (RFC 8032 strict verification). */
export function verifyEndorsement(signer: Uint8Array, subject: Uint8Array, signature: Uint8Array): boolean {
  return subject.length === 32 && verifyEd25519(signature, endorsementStatement(subject), signer);
}

/**
 * The trust rule of docs/public-keys.md: from `offered`, the keys that a trusted key
 * endorsed, transitively (a key taken becomes a signer for the rest), or that `allowed`
 * names by key id and fingerprint. An offered key whose key id is not its own is never
 * taken. Returns the keys taken, in the order offered, without those already trusted.
 */
export function acceptOfferedKeys(trusted: KeySet, offered: readonly OfferedKey[], allowed: readonly AllowedKey[] = []): OfferedKey[] {
  const known = new Map(trusted.map((key) => [key.keyId, key.publicKey]));
  const taken = new Set<string>();
  const sound = offered.filter((key) => key.publicKey.length === 32 && key.keyId === keyIdOf(key.publicKey) && !known.has(key.keyId));
  const take = (key: OfferedKey) => {
    known.set(key.keyId, key.publicKey);
    taken.add(key.keyId);
  };
  for (const key of sound) {
    if (allowed.some((allow) => allow.keyId === key.keyId && allow.fingerprint.toLowerCase() === fingerprintOf(key.publicKey))) take(key);
  }
  for (let grew = true; grew; ) {
    grew = false;
    for (const key of sound) {
      if (known.has(key.keyId)) continue;
      const endorsed = key.endorsements.some((endorsement) => {
        const signer = known.get(endorsement.signerKeyId);
        return signer !== undefined && verifyEndorsement(signer, key.publicKey, endorsement.signature);
      });
      if (endorsed) {
        take(key);
        grew = true;
      }
    }
  }
  return sound.filter((key) => taken.has(key.keyId));
}

/** SHA-256 of the 32 raw public key bytes, lower-case hex: `fingerprint` of the key sets. */
export function fingerprintOf(publicKey: Uint8Array): string {
  return createHash('sha256').update(publicKey).digest('hex');
}
