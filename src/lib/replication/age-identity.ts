import { x25519 } from '@noble/curves/ed25519.js';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bech32 } from '@scure/base';

/**
 * The age X25519 key pair that encrypts the replicas (age-encryption.org/v1, "The X25519
 * recipient type"), derived from backup.encryption_key rather than kept as a second secret:
 * whoever can open this server's backups can open its replicas, and a new host that is given
 * the backup key can restore the replica with nothing else. docs/replication.md states the
 * derivation so that an operator can make the identity without this tool:
 *
 *   scalar    = HKDF-SHA256(IKM = the 32-byte backup key, salt = "license-server replication",
 *               info = "age X25519 identity v1", L = 32)
 *   identity  = upper(bech32("age-secret-key-", scalar))
 *   recipient = bech32("age", X25519(scalar, 9))
 */
export interface AgeKeyPair {
  /** `AGE-SECRET-KEY-1...`: a secret, as the backup key is. */
  readonly identity: string;
  /** `age1...`: public. */
  readonly recipient: string;
}

const SALT = new TextEncoder().encode('license-server replication');
const INFO = new TextEncoder().encode('age X25519 identity v1');

export function replicaAgeKeys(backupKey: Uint8Array): AgeKeyPair {
  if (backupKey.length !== 32) throw new RangeError('replicaAgeKeys: the backup key must be 32 bytes');
  const scalar = hkdf(sha256, backupKey, SALT, INFO, 32);
  return {
    identity: bech32.encode('age-secret-key-', bech32.toWords(scalar), false).toUpperCase(),
    recipient: bech32.encode('age', bech32.toWords(x25519.getPublicKey(scalar)), false),
  };
}
