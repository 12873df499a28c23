import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { databaseInUse, sleep, waitFor, type DaemonLock, type DaemonLockOptions } from './daemon-lock.js';
import { daemonLockFile, SqliteLockFile } from './sqlite-lock-file.js';

/** Between two attempts of a daemon to take its shared lock back after a restore through it. */
const RETAKE_MS = 250;

/**
 * SHARED on `<database>.daemon-lock` for as long as the daemon runs; a restore takes it
 * EXCLUSIVE before it checks for daemons and keeps it until it is done, so a daemon that
 * starts meanwhile waits and then opens the restored file, never the replaced one. The
 * kernel drops a dead daemon's lock, so nothing stale is ever left to clean up.
 * `<database>.serve` only names the daemon's process for the DATABASE_IN_USE message.
 */
export class SqliteDaemonLock implements DaemonLock {
  private released = false;

  private constructor(
    private readonly database: string,
    private readonly lock: SqliteLockFile,
    private readonly options: DaemonLockOptions,
  ) {}

  static async take(database: string, options: DaemonLockOptions): Promise<SqliteDaemonLock> {
    const lock = SqliteLockFile.open(daemonLockFile(database));
    try {
      await waitFor(async () => (lock.tryShared() ? { taken: true } : { taken: false, holder: `its lock ${daemonLockFile(database)} is held by another process` }), options, RETAKE_MS);
    } catch (error) {
      lock.close();
      throw error;
    }
    writeFileSync(pidFile(database), JSON.stringify({ pid: process.pid, host: hostname(), started_at: new Date().toISOString() }), { mode: 0o600 });
    return new SqliteDaemonLock(database, lock, options);
  }

  async excludeOtherDaemons(): Promise<() => Promise<void>> {
    if (this.lock.tryExclusive()) {
      return async () => {
        if (!this.lock.tryShared()) this.lostUntilRetaken();
      };
    }
    // Another daemon holds it shared: this one takes its own share back at once.
    if (!this.lock.tryShared()) this.lostUntilRetaken();
    throw databaseInUse(otherDaemon(this.database));
  }

  async release(): Promise<void> {
    this.released = true;
    this.lock.close();
    if (readHolder(this.database)?.pid === process.pid) rmSync(pidFile(this.database), { force: true });
  }

  /** Only a starting daemon's moment can be in the way (a restore needs the backup lock this daemon's restore holds). */
  private lostUntilRetaken(): void {
    this.options.onLost?.('it could not take its shared lock back after a restore');
    void (async () => {
      while (!this.released) {
        await sleep(RETAKE_MS);
        if (!this.released && this.lock.tryShared()) {
          this.options.onRegained?.();
          return;
        }
      }
    })();
  }
}

/** For a command-line restore: EXCLUSIVE on the daemon lock, or DATABASE_IN_USE. */
export async function lockOutSqliteDaemons(database: string): Promise<() => Promise<void>> {
  const lock = SqliteLockFile.open(daemonLockFile(database));
  if (!lock.tryExclusive()) {
    lock.close();
    throw databaseInUse(otherDaemon(database));
  }
  return async () => lock.close();
}

function pidFile(database: string): string {
  return `${database}.serve`;
}

function readHolder(database: string): { pid: number; host: string } | undefined {
  try {
    return JSON.parse(readFileSync(pidFile(database), 'utf8')) as { pid: number; host: string };
  } catch {
    return undefined;
  }
}

/** The last daemon that started, if it is still running and is not this process. */
function otherDaemon(database: string): string | undefined {
  const holder = readHolder(database);
  if (!holder || holder.pid === process.pid) return undefined;
  if (holder.host !== hostname()) return `process ${holder.pid} on ${holder.host}`;
  try {
    process.kill(holder.pid, 0);
    return `process ${holder.pid}`;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? `process ${holder.pid}` : undefined;
  }
}
