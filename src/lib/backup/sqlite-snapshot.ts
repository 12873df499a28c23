import { LicenseServerError } from '../errors.js';

/**
 * A consistent copy of a live SQLite database with VACUUM INTO, on a connection of its own:
 * it reads one snapshot and finishes even while other processes commit every few
 * milliseconds (the online backup API copying in small steps restarts on every commit and
 * may never finish), and it never copies the live file, which would lose what is still only
 * in the WAL. The copy is a fresh file without the WAL flag.
 */
export async function snapshotSqlite(source: string, target: string): Promise<void> {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(source, { readonly: true, fileMustExist: true, timeout: 5000 });
  try {
    db.prepare('VACUUM INTO ?').run(target);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'SQLITE_FULL' || code === 'SQLITE_IOERR_WRITE' || code === 'SQLITE_CANTOPEN') {
      throw new LicenseServerError('FILE_WRITE_FAILED', `cannot write the database snapshot: ${code === 'SQLITE_FULL' ? 'no space left on the device' : code}`);
    }
    throw error;
  } finally {
    db.close();
  }
  await checkSqlite(target, 'quick_check');
}

/** PRAGMA quick_check (cheap, before packing) or integrity_check (thorough, for validate and restore). */
export async function checkSqlite(file: string, check: 'quick_check' | 'integrity_check'): Promise<void> {
  const { default: Database } = await import('better-sqlite3');
  let result: string[];
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      const rows = db.pragma(check) as Array<Record<string, unknown>>;
      result = rows.map((row) => String(Object.values(row)[0]));
    } finally {
      db.close();
    }
  } catch (error) {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: the SQLite database does not open (${(error as Error).message})`);
  }
  if (result.length !== 1 || result[0] !== 'ok') {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${check} of the SQLite database reports ${result.slice(0, 3).join('; ')}`);
  }
}

/** The schema version recorded in a SQLite database file. */
export async function sqliteSchemaVersion(file: string): Promise<number> {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null } | undefined;
    return Number(row?.version ?? 0);
  } catch {
    return 0;
  } finally {
    db.close();
  }
}
