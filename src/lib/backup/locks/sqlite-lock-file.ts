import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { LicenseServerError } from '../../errors.js';
import { describeFsError } from '../../fs-errors.js';
import { storeAccessDenied } from '../../storage/file-access.js';
import { loadSqliteDriver } from '../../storage/sqlite-driver.js';

/**
 * A lock between processes that disappears with its holder, taken on a small side file of
 * a SQLite database. Node has no flock(), but SQLite's own fcntl() locks are exactly that:
 * the side file stays an empty database in rollback-journal mode, a read transaction holds
 * SQLite's SHARED lock on it and BEGIN EXCLUSIVE its EXCLUSIVE lock, both released by the
 * kernel when the process dies, however it dies. Both are tried once (busy timeout 0), never
 * waited for. SQLite also keeps the connections of one process apart, so this works between
 * two holders in one process too. The file holds no data, and is never removed: a holder of
 * a removed file would lock a name nobody else opens.
 */
export class SqliteLockFile {
  private mode: 'none' | 'shared' | 'exclusive' = 'none';

  private constructor(private readonly db: BetterSqlite3.Database) {}

  static open(file: string): SqliteLockFile {
    try {
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      closeSync(openSync(file, 'a', 0o600));
    } catch (error) {
      // The daemon's lock comes before its database: another user's store says so here.
      throw storeAccessDenied(file, { create: true, what: 'the lock file' }) ?? new LicenseServerError('FILE_WRITE_FAILED', `cannot create the lock file ${file}: ${describeFsError(error)}`, { cause: error });
    }
    const Driver = loadSqliteDriver();
    return new SqliteLockFile(new Driver(file, { timeout: 0 }));
  }

  /** Takes the SHARED lock; false while someone holds (or is taking) the EXCLUSIVE one. */
  tryShared(): boolean {
    this.release();
    try {
      this.db.exec('BEGIN');
      // A read is what makes SQLite take SHARED; the schema of an empty file is enough.
      this.db.prepare('SELECT count(*) FROM sqlite_master').get();
      this.mode = 'shared';
      return true;
    } catch (error) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      if (isBusy(error)) return false;
      throw error;
    }
  }

  /** Takes the EXCLUSIVE lock; false while anyone else holds SHARED or EXCLUSIVE. */
  tryExclusive(): boolean {
    this.release();
    try {
      // No journal file: nothing is ever written here, and a full disk must not stop a lock.
      this.db.pragma('journal_mode = MEMORY');
      this.db.exec('BEGIN EXCLUSIVE');
      this.mode = 'exclusive';
      return true;
    } catch (error) {
      if (isBusy(error)) return false;
      throw error;
    }
  }

  get held(): 'none' | 'shared' | 'exclusive' {
    return this.mode;
  }

  release(): void {
    if (this.db.inTransaction) this.db.exec('ROLLBACK');
    this.mode = 'none';
  }

  close(): void {
    this.release();
    if (this.db.open) this.db.close();
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: string }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

/** The side files of a SQLite database: one for daemons and restores, one for backup work. */
export function daemonLockFile(database: string): string {
  return `${database}.daemon-lock`;
}

export function backupLockFile(database: string): string {
  return `${database}.backup-lock`;
}
