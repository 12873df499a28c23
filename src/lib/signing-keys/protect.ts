import { recordAudit } from '../audit.js';
import type { OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import type { Database } from '../storage/types.js';
import { asBytesOrNull } from '../storage/values.js';
import { keyEncryptionKeyOf } from './kek-registry.js';
import { daemonsWithoutKek } from './daemon-keks.js';
import { eraseReplacedKeys } from './erase.js';
import { kekIdOf, openSecretKey, sealSecretKey } from './protection.js';

export interface ProtectionReport {
  /** Key ids whose private key this call sealed (protect) or unsealed (unprotect). */
  readonly changed: string[];
  /** Key ids that were already in the asked-for form. */
  readonly unchanged: string[];
  /**
   * Protect: the running daemons that could not open the sealed keys (no key-encryption key,
   * or another one), sealed anyway with `force`; they sign nothing until restarted with it.
   */
  readonly daemons_without_key: string[];
  /** Why the unsealed bytes may still be in the database files (erase.ts), or null when they are gone. */
  readonly erase_warning: string | null;
}

export interface ProtectionOptions {
  /** database.url: where the running daemons publish their key-encryption key, and what erase.ts rewrites. */
  readonly databaseUrl: string;
  /** Seal even though a running daemon could not open the sealed keys. */
  readonly force?: boolean;
}

/**
 * Seals (protect) or unseals (unprotect) every private key of the store in one transaction:
 * either all keys end in the new form or none changes. Both need the configured
 * key-encryption key; a key sealed under another one is refused (SIGNING_KEK_WRONG) before
 * anything is written. Protect is refused (SIGNING_KEK_NOT_IN_DAEMON) while a running daemon
 * could not open the sealed keys, unless `force`: that daemon would go on signing with the
 * key it has in memory only until its next start, which would then fail. Afterwards the
 * unsealed bytes are erased from the database files (erase.ts).
 */
export async function setKeyProtection(db: Database, sealed: boolean, context: OperationContext, options: ProtectionOptions): Promise<ProtectionReport> {
  const kek = keyEncryptionKeyOf(db);
  if (!kek) {
    throw new LicenseServerError('SIGNING_KEK_REQUIRED', `signing-key ${sealed ? 'protect' : 'unprotect'} needs signing.key_encryption_key (or LICENSE_SIGNING_KEY_ENCRYPTION_KEY)`);
  }
  const kekId = kekIdOf(kek);
  const unable = sealed ? await daemonsWithoutKek(options.databaseUrl, kekId) : [];
  if (unable.length > 0 && options.force !== true) {
    throw new LicenseServerError(
      'SIGNING_KEK_NOT_IN_DAEMON',
      `${unable.length === 1 ? 'a running daemon' : `${unable.length} running daemons`} of this database could not open the keys once sealed (kek id ${kekId}): ${unable.join('; ')}; nothing was sealed`,
    );
  }
  const report = await db.transaction(async (tx) => {
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
  const eraseWarning = sealed && report.changed.length > 0 ? await eraseReplacedKeys(db, options.databaseUrl) : null;
  return { ...report, daemons_without_key: unable, erase_warning: eraseWarning };
}
