import { open, readdir, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { LicenseServerError } from '../../errors.js';
import { asWriteFailure } from '../../fs-errors.js';
import { readSmallRegularFile } from '../../files/regular-file.js';

interface Holder {
  readonly pid: number;
  readonly host: string;
  readonly operation: string;
  readonly started_at: string;
}

/**
 * One backup, restore or prune at a time per backup directory: a lock file holding the
 * holder's pid, host and start time, taken with O_EXCL. A lock whose process is gone (same
 * host, pid not running) is stale and taken over. Given the database, also one at a time
 * per database, whatever the backup directory. Returns the release function.
 */
export async function acquireBackupLock(
  directory: string,
  operation: string,
  now: Date = new Date(),
  databaseUrl?: string,
): Promise<() => Promise<void>> {
  const releaseFile = await acquireFileLock(directory, operation, now);
  if (!databaseUrl) return releaseFile;
  try {
    const releaseDatabase = /^postgres(ql)?:\/\//i.test(databaseUrl) ? await acquireAdvisoryLock(databaseUrl, operation) : await acquireSqliteLock(databaseUrl);
    return async () => {
      await releaseDatabase();
      await releaseFile();
    };
  } catch (error) {
    await releaseFile();
    throw error;
  }
}

// Arbitrary but fixed, and different from the migration lock.
const PG_BACKUP_LOCK = 0x4c53_424b;

/**
 * Two hosts with their own backup directories can share one PostgreSQL database; a session
 * advisory lock, held on a connection of its own for the whole operation, keeps them from
 * backing up or restoring it at the same time.
 */
async function acquireAdvisoryLock(databaseUrl: string, operation: string): Promise<() => Promise<void>> {
  const { DEFAULT_POSTGRES_TIMEOUTS, endPostgresClient, newPostgresClient, withDeadline } = await import('../../storage/postgres-connection.js');
  const client = newPostgresClient(databaseUrl, `license-server ${operation}`);
  const end = () => endPostgresClient(client, 1000);
  try {
    await client.connect();
  } catch {
    // No database to coordinate through (a restore onto a server that is down fails later, clearly).
    return async () => undefined;
  }
  const ms = DEFAULT_POSTGRES_TIMEOUTS.queryTimeout * 1000;
  let locked: boolean;
  try {
    locked = (await withDeadline(client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [PG_BACKUP_LOCK]), ms, () => new Error(`no answer within ${ms / 1000} s`))).rows[0]?.locked === true;
  } catch (error) {
    await end();
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot take the backup lock on the PostgreSQL database: ${(error as Error).message}`);
  }
  if (!locked) {
    await end();
    throw new LicenseServerError('BACKUP_IN_PROGRESS', 'another host is backing up or restoring this PostgreSQL database right now');
  }
  return end;
}

/**
 * The same for SQLite, where two backup directories (two LICENSE_BACKUP_PATH values) on one
 * database would otherwise run at once: EXCLUSIVE on `<database>.backup-lock`, which the
 * kernel releases if this process dies.
 */
async function acquireSqliteLock(database: string): Promise<() => Promise<void>> {
  const { backupLockFile, SqliteLockFile } = await import('./sqlite-lock-file.js');
  const lock = SqliteLockFile.open(backupLockFile(database));
  if (!lock.tryExclusive()) {
    lock.close();
    throw new LicenseServerError('BACKUP_IN_PROGRESS', `another process is backing up, restoring or pruning the SQLite database ${database} right now (with another backup directory)`);
  }
  return async () => lock.close();
}

async function acquireFileLock(directory: string, operation: string, now: Date): Promise<() => Promise<void>> {
  const file = path.join(directory, '.lock');
  const holder: Holder = { pid: process.pid, host: hostname(), operation, started_at: now.toISOString() };
  for (let attempt = 0; attempt < 2; attempt += 1) {
    let made = false;
    try {
      const handle = await open(file, 'wx', 0o600);
      made = true;
      try {
        await handle.writeFile(JSON.stringify(holder));
        await handle.sync();
      } finally {
        await handle.close();
      }
      await removeLeftovers(directory);
      return async () => {
        await rm(file, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        // An empty lock file (a full disk) would be left behind, and read by others as a dead holder's.
        if (made) await rm(file, { force: true }).catch(() => undefined);
        throw asWriteFailure(error, `cannot take the backup lock in ${directory}`);
      }
      const current = await readHolder(file);
      if (current && isAlive(current)) {
        throw new LicenseServerError(
          'BACKUP_IN_PROGRESS',
          `a backup ${current.operation} started at ${current.started_at} by process ${current.pid} on ${current.host} is still running`,
        );
      }
      await rm(file, { force: true });
    }
  }
  throw new LicenseServerError('BACKUP_IN_PROGRESS', 'another process took the backup lock at the same moment');
}

/**
 * Whatever a killed create or restore left behind: only the lock holder writes these, so
 * with the lock in hand they are all stale.
 */
async function removeLeftovers(directory: string): Promise<void> {
  for (const name of await readdir(directory).catch(() => [] as string[])) {
    if (name.startsWith('.tmp-') || name.endsWith('.partial')) await rm(path.join(directory, name), { recursive: true, force: true });
  }
}

/** Whether a live process holds the directory's backup lock (read-only: for `backup list`). */
export async function backupLockHolderAlive(directory: string): Promise<boolean> {
  const holder = await readHolder(path.join(directory, '.lock'));
  return holder !== undefined && isAlive(holder);
}

async function readHolder(file: string): Promise<Holder | undefined> {
  try {
    // A lock is a line of JSON; a link, a FIFO or a huge file in its place is nobody's lock.
    const text = await readSmallRegularFile(file, 64 * 1024);
    return Buffer.isBuffer(text) ? (JSON.parse(text.toString('utf8')) as Holder) : undefined;
  } catch {
    // Unreadable or half-written: its writer died between open and write.
    return undefined;
  }
}

function isAlive(holder: Holder): boolean {
  // A lock from another host cannot be checked from here: it is respected.
  if (holder.host !== hostname()) return true;
  if (holder.pid === process.pid) return true;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
