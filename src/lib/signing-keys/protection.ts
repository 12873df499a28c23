import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { LicenseServerError } from '../errors.js';

/**
 * Private signing keys sealed at rest under the key-encryption key (setting
 * `signing.key_encryption_key`), as docs/backup-format.md section "Sealed signing keys" pins:
 *
 *   kek id      = hex(HMAC-SHA256(kek, "license-server/v1/signing-kek-id"))[0..16]
 *   sealing key = HKDF-SHA256(IKM = kek, salt = "", info = "license-server/v1/signing-key-seal", L = 32)
 *   sealed      = nonce (12) || AES-256-GCM(sealing key, nonce, seed (32), AAD = UTF-8(key_id)) || tag (16)
 *
 * The kek id stored beside each sealed key tells a wrong key-encryption key (another id)
 * from a damaged stored key (the right id, but the tag fails); the key id as associated
 * data keeps a sealed key from being moved onto another key's row.
 */
export const SEALED_SECRET_LENGTH = 60;
const KEK_ID_LABEL = 'license-server/v1/signing-kek-id';
const SEAL_INFO = new TextEncoder().encode('license-server/v1/signing-key-seal');

export function kekIdOf(kek: Uint8Array): string {
  return createHmac('sha256', kek).update(KEK_ID_LABEL).digest('hex').slice(0, 16);
}

function sealingKey(kek: Uint8Array): Buffer {
  return Buffer.from(hkdf(sha256, kek, new Uint8Array(0), SEAL_INFO, 32));
}

export function sealSecretKey(secretKey: Uint8Array, kek: Uint8Array, keyId: string, nonce: Uint8Array = randomBytes(12)): Buffer {
  const cipher = createCipheriv('aes-256-gcm', sealingKey(kek), nonce);
  cipher.setAAD(Buffer.from(keyId, 'utf8'));
  return Buffer.concat([nonce, cipher.update(secretKey), cipher.final(), cipher.getAuthTag()]);
}

/** The 32-byte seed of a stored private key, opening it when it is sealed. */
export function openSecretKey(stored: Uint8Array, sealedWith: string | null, kek: Uint8Array | undefined, keyId: string): Uint8Array {
  if (sealedWith === null) return Uint8Array.from(stored);
  if (!kek) throw keyEncryptionKeyRequired(keyId);
  const given = kekIdOf(kek);
  if (given !== sealedWith) {
    throw new LicenseServerError(
      'SIGNING_KEK_WRONG',
      `the configured signing.key_encryption_key (kek id ${given}) is not the one that sealed signing key ${keyId} (kek id ${sealedWith})`,
    );
  }
  const bytes = Buffer.from(stored);
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealingKey(kek), bytes.subarray(0, 12));
    decipher.setAAD(Buffer.from(keyId, 'utf8'));
    decipher.setAuthTag(bytes.subarray(44, 60));
    return new Uint8Array(Buffer.concat([decipher.update(bytes.subarray(12, 44)), decipher.final()]));
  } catch {
    throw new LicenseServerError(
      'SIGNING_KEY_DAMAGED',
      `signing key ${keyId} does not open with the right key-encryption key (kek id ${given}): the stored key is damaged`,
    );
  }
}

export function keyEncryptionKeyRequired(keyId: string): LicenseServerError {
  return new LicenseServerError(
    'SIGNING_KEK_REQUIRED',
    `signing key ${keyId} is sealed and no signing.key_encryption_key is configured, so nothing can be signed`,
  );
}
