import pg from 'pg';
import { redactDatabaseUrl } from '../config/redact.js';
import { LicenseServerError } from '../errors.js';
import { postgresUnavailable } from '../storage/postgres.js';
import { DAEMON_APPLICATION_NAME, databaseInUse, sleep, waitFor, type DaemonLock, type DaemonLockOptions } from './daemon-lock.js';

// Arbitrary but fixed, and different from the backup and migration locks.
const PG_DAEMON_LOCK = 0x4c53_5356;

/** Between two attempts to take the lock again after its connection was lost. */
const RETAKE_MS = 1000;

/**
 * A session advisory lock on a connection of its own: every daemon holds it shared, a
 * restore exclusively (pg_try_advisory_lock never queues, so a waiting restore never blocks
 * a daemon, nor a waiting daemon a restore). The server drops it with the session, so a
 * daemon whose connection ends (server restart, pg_terminate_backend, idle_session_timeout)
 * no longer holds it: onLost fences the daemon, which takes it again before it serves.
 */
export class PostgresDaemonLock implements DaemonLock {
  private client: pg.Client | undefined;
  private released = false;

  private constructor(
    private readonly url: string,
    private readonly options: DaemonLockOptions,
  ) {}

  static async take(url: string, options: DaemonLockOptions): Promise<PostgresDaemonLock> {
    const lock = new PostgresDaemonLock(url, options);
    await waitFor(() => lock.tryTake(), options, 500);
    return lock;
  }

  async excludeOtherDaemons(): Promise<() => Promise<void>> {
    const client = this.client;
    if (!client) throw new LicenseServerError('DATABASE_UNAVAILABLE', 'this daemon lost its lock on the database and has not taken it again yet');
    // A session's own shared hold does not conflict with its exclusive request: only other sessions' do.
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [PG_DAEMON_LOCK]);
    if (!rows[0]?.locked) throw databaseInUse(await holders(client, 'ShareLock'));
    return async () => {
      await client.query('SELECT pg_advisory_unlock($1)', [PG_DAEMON_LOCK]).catch(() => undefined);
    };
  }

  async release(): Promise<void> {
    this.released = true;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async tryTake(): Promise<{ taken: true } | { taken: false; holder: string }> {
    const client = new pg.Client({ connectionString: this.url, application_name: DAEMON_APPLICATION_NAME, keepAlive: true, connectionTimeoutMillis: 5000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (error) {
      throw postgresUnavailable(redactDatabaseUrl(this.url), error);
    }
    let locked: boolean;
    try {
      locked = (await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock_shared($1) AS locked', [PG_DAEMON_LOCK])).rows[0]?.locked === true;
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (!locked) {
      const holder = (await holders(client, 'ExclusiveLock')) ?? 'a restore';
      await client.end().catch(() => undefined);
      return { taken: false, holder };
    }
    this.client = client;
    client.once('end', () => this.lost(client));
    return { taken: true };
  }

  private lost(client: pg.Client): void {
    if (this.released || this.client !== client) return;
    this.client = undefined;
    this.options.onLost?.('its connection to PostgreSQL ended');
    void this.retake();
  }

  /** Until released: a server that is down, or a restore that holds the lock, is waited out. */
  private async retake(): Promise<void> {
    while (!this.released) {
      await sleep(RETAKE_MS);
      if (this.released) return;
      try {
        if ((await this.tryTake()).taken) {
          // Released while it was being taken: let go of it again.
          if (this.released) await this.release();
          else this.options.onRegained?.();
          return;
        }
      } catch {
        // The server is not back yet.
      }
    }
  }
}

/** For a command-line restore; a server that cannot be reached is reported by the restore itself. */
export async function lockOutPostgresDaemons(url: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url, application_name: 'license-server restore' });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch {
    return async () => undefined;
  }
  const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [PG_DAEMON_LOCK]);
  if (!rows[0]?.locked) {
    const error = databaseInUse(await holders(client, 'ShareLock'));
    await client.end().catch(() => undefined);
    throw error;
  }
  return async () => {
    await client.end().catch(() => undefined);
  };
}

/** Who else holds the daemon lock in `mode`: their backend pids and client addresses. */
async function holders(client: pg.Client, mode: 'ShareLock' | 'ExclusiveLock'): Promise<string | undefined> {
  const { rows } = await client.query<{ pid: number; addr: string | null; app: string }>(
    `SELECT a.pid, a.client_addr::text AS addr, a.application_name AS app
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.mode = $2 AND l.pid <> pg_backend_pid()
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid::bigint = 0 AND l.objid::bigint = $1 AND l.objsubid = 1
      ORDER BY a.pid`,
    [PG_DAEMON_LOCK, mode],
  ).catch(() => ({ rows: [] }));
  if (rows.length === 0) return undefined;
  const named = rows.map((row) => `${row.app || 'a session'} from ${row.addr ?? 'a local socket'}, server pid ${row.pid}`);
  return `${rows.length} holder(s): ${named.join('; ')}`;
}
