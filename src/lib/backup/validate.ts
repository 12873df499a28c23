import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { LicenseServerError } from '../errors.js';
import { asWriteFailure } from '../fs-errors.js';
import type { Progress } from './archive/archive.js';
import { clearDebris } from './locks/debris.js';
import { resolveBackup } from './repository.js';
import { checkSqlite, sqliteSchemaVersion } from './engines/sqlite-snapshot.js';
import { verifyArchive } from './archive/verify.js';
import { ownedWorkPrefix } from './locks/work-owner.js';

export interface ValidationCheck {
  readonly check: string;
  readonly detail: string;
}

export interface BackupValidation {
  readonly backup_id: string;
  readonly file: string;
  readonly created_at: string;
  readonly engine: string;
  readonly schema_version: number;
  readonly encrypted: boolean;
  /** What was checked, in order; a failed check throws instead of appearing here. */
  readonly checks: readonly ValidationCheck[];
}

/**
 * The thorough check of one backup: every chunk's tag, the gzip stream, the manifest, every
 * entry's checksum, and the database itself (SQLite integrity_check on the extracted
 * snapshot; PostgreSQL: a load into a scratch database that is dropped afterwards, or on a
 * SQLite host a conversion into a scratch SQLite file).
 */
export async function validateBackup(options: {
  directory: string;
  reference: string;
  key?: Buffer;
  /**
   * PostgreSQL server to load a dump into, for a postgres backup; without one the dump is
   * converted into a scratch SQLite file instead.
   */
  scratchDatabaseUrl?: string;
  onProgress?: Progress;
  /** database.url: with it, dead validates' and restores' leftovers there are cleared too. */
  databaseUrl?: string;
  /**
   * Further checks of the backup's database as a SQLite file (the extracted snapshot, or the
   * dump's conversion), made before the working files are removed: a restore drill's.
   */
  inspect?: (sqliteFile: string) => Promise<readonly ValidationCheck[]>;
}): Promise<BackupValidation> {
  // No lock: a validate reads, and may run beside a create. It clears only what dead
  // processes left (named by their owner) and a finished prune's archives; adopting an
  // unlisted archive is for the lock holder (debris.ts).
  await clearDebris({ directory: options.directory, databaseUrl: options.databaseUrl ?? options.scratchDatabaseUrl }).catch(() => undefined);
  const { file, record } = await resolveBackup(options.directory, options.reference);
  const writeFailed = `cannot write the validation's working files into ${path.dirname(file)}`;
  const work = await mkdtemp(path.join(path.dirname(file), ownedWorkPrefix('validate'))).catch((error: unknown) => {
    throw asWriteFailure(error, writeFailed);
  });
  try {
    const archive = await verifyArchive(file, { key: options.key, extractTo: work, onProgress: options.onProgress, expected: record });
    const { manifest } = archive;
    const checks: ValidationCheck[] = [
      { check: 'archive', detail: archive.encrypted ? 'every chunk authenticated, gzip intact' : 'gzip intact (not encrypted)' },
      { check: 'manifest', detail: `format ${manifest.format_version}, ${manifest.entries.length} entries` },
      { check: 'checksums', detail: 'every entry matches its size and SHA-256' },
    ];
    if (manifest.engine === 'sqlite') {
      const database = archive.files.get('database/sqlite.db')!;
      await checkSqlite(database, 'integrity_check');
      const version = await sqliteSchemaVersion(database);
      if (version !== manifest.schema_version) {
        throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: the database has schema ${version}, the manifest says ${manifest.schema_version}`);
      }
      checks.push({ check: 'database', detail: `SQLite integrity_check ok, schema ${version}` });
      if (options.inspect) checks.push(...(await options.inspect(database)));
    } else {
      const dump = archive.files.get('database/postgres.sql')!;
      if (options.scratchDatabaseUrl) {
        const { loadDumpIntoScratch } = await import('./engines/postgres-restore.js');
        const rows = await loadDumpIntoScratch(options.scratchDatabaseUrl, dump);
        checks.push({ check: 'database', detail: `loaded into a scratch database (${rows} rows), dropped again` });
      } else {
        // Without a PostgreSQL server at hand, the dump is checked the way a restore onto this
        // SQLite host would use it: converted into a scratch SQLite file, which is then checked.
        const { buildSqliteFromPostgresDump } = await import('./engines/cross-engine/postgres-to-sqlite.js');
        const scratch = path.join(work, 'converted-sqlite.db');
        const { rows } = await buildSqliteFromPostgresDump(dump, scratch);
        await checkSqlite(scratch, 'integrity_check');
        const total = Object.values(rows).reduce((sum, n) => sum + n, 0);
        checks.push({ check: 'database', detail: `converted into a scratch SQLite database (${total} rows), integrity_check ok, removed again` });
        if (options.inspect) checks.push(...(await options.inspect(scratch)));
      }
    }
    return {
      backup_id: manifest.backup_id,
      file,
      created_at: manifest.created_at,
      engine: manifest.engine,
      schema_version: manifest.schema_version,
      encrypted: archive.encrypted,
      checks,
    };
  } catch (error) {
    throw asWriteFailure(error, writeFailed);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
