import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { LicenseServerError } from '../errors.js';
import type { Progress } from './archive.js';
import { resolveBackup } from './repository.js';
import { checkSqlite, sqliteSchemaVersion } from './sqlite-snapshot.js';
import { verifyArchive } from './verify.js';

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
 * snapshot; PostgreSQL: a load into a scratch database that is dropped afterwards).
 */
export async function validateBackup(options: {
  directory: string;
  reference: string;
  key?: Buffer;
  /** PostgreSQL server to load a dump into, for a postgres backup. */
  scratchDatabaseUrl?: string;
  onProgress?: Progress;
}): Promise<BackupValidation> {
  const { file, record } = await resolveBackup(options.directory, options.reference);
  const work = await mkdtemp(path.join(path.dirname(file), '.validate-'));
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
    } else {
      const { loadDumpIntoScratch } = await import('./postgres-restore.js');
      if (!options.scratchDatabaseUrl) {
        throw new LicenseServerError(
          'BACKUP_ENGINE_MISMATCH',
          'the backup is of a PostgreSQL database, which is validated by loading it into a scratch PostgreSQL database, and database.url is a SQLite database; validate it where database.url is PostgreSQL',
          { hint: 'Run backup validate with LICENSE_DATABASE_URL set to a PostgreSQL server where a scratch database may be created.' },
        );
      }
      const rows = await loadDumpIntoScratch(options.scratchDatabaseUrl, archive.files.get('database/postgres.sql')!);
      checks.push({ check: 'database', detail: `loaded into a scratch database (${rows} rows), dropped again` });
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
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
