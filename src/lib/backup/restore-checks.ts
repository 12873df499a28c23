import { LicenseServerError } from '../errors.js';
import { SCHEMA_VERSION } from '../storage/migrations.js';
import { openDatabase } from '../storage/open.js';
import type { Database, Row } from '../storage/types.js';
import type { Manifest } from './archive/manifest.js';
import { keyReplacementNotConfirmed, keySummariesOf, planKeySet, type KeySummary } from './signing-key-carry.js';

/** What a restore and its dry run both refuse, from the verified manifest alone. */
export function checkCompatible(manifest: Manifest): void {
  if (manifest.schema_version > SCHEMA_VERSION) {
    throw new LicenseServerError(
      'BACKUP_UNSUPPORTED',
      `the backup has schema version ${manifest.schema_version}, newer than this license-server knows (${SCHEMA_VERSION}); restore it with a newer release`,
    );
  }
}

/** The store's keys; none on a new host; undefined when they cannot be read as keys (a schema before 5). */
export async function currentKeySummaries(url: string, open?: Database): Promise<KeySummary[] | undefined> {
  let db = open;
  if (!db) {
    try {
      db = await openDatabase(url, { create: false, migrate: false });
    } catch (error) {
      if (!(error instanceof LicenseServerError)) throw error;
      // Not there is a new host; one that cannot be reached is for the restore itself to report.
      return error.code === 'DATABASE_NOT_FOUND' ? [] : undefined;
    }
  }
  try {
    const { listSigningKeys } = await import('../signing-keys/keys.js');
    return (await listSigningKeys(db)).map(({ key_id, state, created_at }) => ({ key_id, state, created_at }));
  } catch {
    return undefined;
  } finally {
    if (!open) await db.close();
  }
}

/**
 * Refuses another server's backup without `replaceKeys` before a restore takes its pre-restore
 * backup or replaces anything: from the keys the backup's own data holds (sqliteSigningKeys, or
 * the loaded dump's), never from what its index or manifest lists. SigningKeyCarry decides once
 * more inside the swap, with the public keys too.
 */
export async function refuseUnconfirmedKeyReplacement(backupId: string, backupKeys: readonly KeySummary[], url: string, replaceKeys: boolean | undefined): Promise<void> {
  if (replaceKeys) return;
  const current = await currentKeySummaries(url);
  if (current && planKeySet(current, backupKeys).another_server) throw keyReplacementNotConfirmed(backupId);
}

/** The signing keys of a staged SQLite database (a backup's snapshot, or a dump converted into one). */
export async function sqliteSigningKeys(file: string): Promise<KeySummary[]> {
  const { loadSqliteDriver } = await import('../storage/sqlite-driver.js');
  const Driver = loadSqliteDriver();
  const db = new Driver(file, { readonly: true, fileMustExist: true });
  try {
    if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'signing_keys'").get() === undefined) return [];
    const current = db.prepare("SELECT 1 FROM pragma_table_info('signing_keys') WHERE name = 'retired_at'").get() !== undefined;
    return keySummariesOf(db.prepare('SELECT * FROM signing_keys').all() as Row[], current);
  } finally {
    db.close();
  }
}
