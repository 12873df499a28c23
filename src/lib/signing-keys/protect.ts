import { recordAudit } from '../audit.js';
import type { OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import type { Database } from '../storage/types.js';
import { asBytesOrNull } from '../storage/values.js';
import { keyEncryptionKeyOf } from './kek-registry.js';
import { kekIdOf, openSecretKey, sealSecretKey } from './protection.js';

export interface ProtectionReport {
  /** Key ids whose private key this call sealed (protect) or unsealed (unprotect). */
  readonly changed: string[];
  /** Key ids that were already in the asked-for form. */
  readonly unchanged: string[];
}

/**
 * Seals (protect) or unseals (unprotect) every private key of the store in one transaction:
 * either all keys end in the new form or none changes. Both need the configured
 * key-encryption key; a key sealed under another one is refused (SIGNING_KEK_WRONG) before
 * anything is written.
 */
export async function setKeyProtection(db: Database, sealed: boolean, context: OperationContext): Promise<ProtectionReport> {
  const kek = keyEncryptionKeyOf(db);
  if (!kek) {
    throw new LicenseServerError('SIGNING_KEK_REQUIRED', `signing-key ${sealed ? 'protect' : 'unprotect'} needs signing.key_encryption_key (or LICENSE_SIGNING_KEY_ENCRYPTION_KEY)`);
  }
  const kekId = kekIdOf(kek);
  return db.transaction(async (tx) => {
    const rows = await tx.query('SELECT id, key_id, private_key, sealed_with FROM signing_keys WHERE private_key IS NOT NULL ORDER BY created_at, key_id');
    const changed: string[] = [];
    const unchanged: string[] = [];
    for (const row of rows) {
      const keyId = String(row.key_id);
      const sealedWith = row.sealed_with === null ? null : String(row.sealed_with);
      if ((sealedWith !== null) === sealed && (sealedWith === null || sealedWith === kekId)) {
        unchanged.push(keyId);
        continue;
      }
      const secretKey = openSecretKey(new Uint8Array(asBytesOrNull(row.private_key)!), sealedWith, kek, keyId);
      try {
        const stored = sealed ? sealSecretKey(secretKey, kek, keyId) : Buffer.from(secretKey);
        await tx.execute('UPDATE signing_keys SET private_key = ?, sealed_with = ? WHERE id = ?', [stored, sealed ? kekId : null, String(row.id)]);
      } finally {
        secretKey.fill(0);
      }
      changed.push(keyId);
    }
    await recordAudit(tx, context, {
      action: sealed ? 'signing_key.protected' : 'signing_key.unprotected',
      entityType: 'signing_key',
      entityId: null,
      details: { kek_id: kekId, changed, unchanged },
    });
    return { changed, unchanged };
  });
}
