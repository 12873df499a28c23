import { LicenseServerError } from '../../errors.js';
import { isPostgresUrl } from '../../storage/open.js';
import type { PostgresTimeouts } from '../../storage/postgres-connection.js';

/** The application_name of every `serve` connection, so that an operator sees them in pg_stat_activity. */
export const DAEMON_APPLICATION_NAME = 'license-server serve';

/**
 * The lock every `serve` holds on its database for its whole life, shared with the other
 * daemons of that database, and that a restore takes exclusively (README, "Restores and
 * running daemons"; docs/backup-format.md names the files and keys). Counting connections
 * missed a daemon whose pool had gone idle, and checking once missed a daemon that started
 * after the check; a lock is held until its holder ends or dies.
 */
export interface DaemonLock {
  /**
   * For a restore through this daemon: the lock becomes exclusive, or DATABASE_IN_USE names
   * the other daemon whose writes the restore would lose. Returns the way back to shared.
   */
  excludeOtherDaemons(): Promise<() => Promise<void>>;
  release(): Promise<void>;
}

export interface DaemonLockOptions {
  /** How long a starting daemon waits for a running restore before RESTORE_IN_PROGRESS. */
  readonly waitSeconds: number;
  /** Once, when a restore holds the lock and the daemon starts waiting for it. */
  readonly onWaiting?: (holder: string) => void;
  /** The lock went away under the running daemon (PostgreSQL: its connection ended). */
  readonly onLost?: (reason: string) => void;
  /** Held again after onLost: the data may have been restored meanwhile. */
  readonly onRegained?: () => void;
  /** PostgreSQL: the database.*_timeout settings, for the lock's own connection. */
  readonly timeouts?: PostgresTimeouts;
}

/** Takes the shared daemon lock, waiting up to `waitSeconds` for a running restore. */
export async function holdDaemonLock(databaseUrl: string, options: DaemonLockOptions): Promise<DaemonLock> {
  if (isPostgresUrl(databaseUrl)) return (await import('./daemon-lock-postgres.js')).PostgresDaemonLock.take(databaseUrl, options);
  return (await import('./daemon-lock-sqlite.js')).SqliteDaemonLock.take(databaseUrl, options);
}

/**
 * For a command-line restore: the daemon lock, exclusively, or DATABASE_IN_USE naming the
 * daemons that hold it. Held until the returned release, so that no daemon starts on the
 * data being replaced.
 */
export async function lockOutDaemons(databaseUrl: string): Promise<() => Promise<void>> {
  if (isPostgresUrl(databaseUrl)) return (await import('./daemon-lock-postgres.js')).lockOutPostgresDaemons(databaseUrl);
  return (await import('./daemon-lock-sqlite.js')).lockOutSqliteDaemons(databaseUrl);
}

export function databaseInUse(holders: string | undefined): LicenseServerError {
  return new LicenseServerError(
    'DATABASE_IN_USE',
    `a license-server daemon (${holders ?? 'its process is not known here'}) is using the database; stop it or restore through its API`,
  );
}

export function restoreRunning(holder: string, waitSeconds: number): LicenseServerError {
  return new LicenseServerError('RESTORE_IN_PROGRESS', `a restore of this database (${holder}) was still running after ${waitSeconds} s`, {
    hint: 'Start the daemon again when the restore has finished, or raise server.restore_wait (LICENSE_RESTORE_WAIT).',
  });
}

/**
 * Tries `take` until it succeeds or `waitSeconds` have passed, telling `onWaiting` once who
 * holds the lock; throws restoreRunning() at the end.
 */
export async function waitFor(
  take: () => Promise<{ taken: true } | { taken: false; holder: string }>,
  options: DaemonLockOptions,
  pollMs: number,
): Promise<void> {
  const deadline = Date.now() + options.waitSeconds * 1000;
  let told = false;
  for (;;) {
    const attempt = await take();
    if (attempt.taken) return;
    if (Date.now() >= deadline) throw restoreRunning(attempt.holder, options.waitSeconds);
    if (!told) options.onWaiting?.(attempt.holder);
    told = true;
    await sleep(Math.min(pollMs, Math.max(1, deadline - Date.now())));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
