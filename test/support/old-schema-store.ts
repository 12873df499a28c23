import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { ed25519 } from '@noble/curves/ed25519.js';
import { createBackup } from '../../src/lib/backup/create.js';
import { resolveConfig } from '../../src/lib/config/resolve.js';
import { generateLicenseKey } from '../../src/lib/licensing/license-key.js';
import { migrate } from '../../src/lib/storage/migrations.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database } from '../../src/lib/storage/types.js';

export interface OldSchemaStore {
  readonly licenseId: string;
  /** The backup of the store as it stood at `version`: its archive's path and id. */
  readonly backupFile: string;
  readonly backupId: string;
}

/**
 * A store as an old release of schema `version` (4 or later) left it, with a signing key, a
 * customer and a license made by hand at schema 4 and migrated up, and its backup. The backup
 * is taken as a pre-restore backup, which raises no event: today's event query reads columns
 * that an old schema lacks, and the command line migrates a store before it raises anything.
 * `keep` leaves the store at `version` (for the caller's rows), else it is closed.
 */
export async function oldSchemaStore(
  url: string,
  version: number,
  options: { readonly backupPath: string; readonly cwd: string; readonly keep?: (db: Database, store: OldSchemaStore) => Promise<void> },
): Promise<OldSchemaStore> {
  const db = await openDatabase(url, { migrate: false });
  try {
    await migrate(db, 4);
    const seed = ed25519.utils.randomSecretKey();
    const at = '2026-01-01T00:00:00.000Z';
    await db.execute('INSERT INTO signing_keys (id, algorithm, public_key, private_key, is_current, created_at) VALUES (?, ?, ?, ?, ?, ?)', [randomUUID(), 'Ed25519', ed25519.getPublicKey(seed), seed, true, at]);
    const customerId = randomUUID();
    await db.execute('INSERT INTO customers (id, name, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?)', [customerId, `Schema ${version} Ltd`, true, at, at]);
    const licenseId = randomUUID();
    await db.execute(
      'INSERT INTO licenses (id, license_key, customer_id, type, active, valid_from, valid_until, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [licenseId, generateLicenseKey(), customerId, 'time_based', true, at, '2099-01-01T00:00:00.000Z', at, at],
    );
    await migrate(db, version);
    const config = await resolveConfig({ env: { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: options.backupPath }, cwd: options.cwd });
    const record = await createBackup({ db, config, trigger: 'pre-restore', toolVersion: 'old', context: { actor: 'test' } });
    if (record.schema_version !== version) throw new Error(`the backup has schema ${record.schema_version}, not ${version}`);
    const store = { licenseId, backupFile: path.join(options.backupPath, record.file), backupId: record.backup_id };
    await options.keep?.(db, store);
    return store;
  } finally {
    await db.close();
  }
}
