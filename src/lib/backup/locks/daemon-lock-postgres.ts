import { hostname } from 'node:os';
import type pg from 'pg';
import { redactDatabaseUrl } from '../../config/redact.js';
import { LicenseServerError } from '../../errors.js';
import { postgresUnavailable } from '../../storage/postgres.js';
import { DEFAULT_POSTGRES_TIMEOUTS, dropPostgresClient, endPostgresClient, inTurn, newPostgresClient, withDeadline } from '../../storage/postgres-connection.js';
import { DAEMON_APPLICATION_NAME, databaseInUse, sleep, waitFor, type DaemonLock, type DaemonLockOptions } from './daemon-lock.js';

// Arbitrary but fixed, and different from the backup and migration locks.
const PG_DAEMON_LOCK = 0x4c53_5356;

/** Between two attempts to take the lock again after its connection was lost. */
const RETAKE_MS = 1000;

/**
 * Between two checks that the lock's connection still answers. A server that stops
 * answering without closing the connection (a proxy or a network that keeps TCP up and
 * forwards nothing) is noticed by nothing else: TCP keepalive is answered by whatever holds
 * the connection open, and the lock's connection sends nothing of its own.
 */
const CHECK_MS = 5000;

/** Waiting for a goodbye that a stalled server never sends. */
const END_GRACE_MS = 1000;

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
  private readonly timeouts;

  private constructor(
    private readonly url: string,
    private readonly options: DaemonLockOptions,
  ) {
    this.timeouts = options.timeouts ?? DEFAULT_POSTGRES_TIMEOUTS;
  }

  static async take(url: string, options: DaemonLockOptions): Promise<PostgresDaemonLock> {
    const lock = new PostgresDaemonLock(url, options);
    await waitFor(() => lock.tryTake(), options, 500);
    return lock;
  }

  async excludeOtherDaemons(): Promise<() => Promise<void>> {
    const client = this.client;
    if (!client) throw new LicenseServerError('DATABASE_UNAVAILABLE', 'this daemon lost its lock on the database and has not taken it again yet');
    // A session's own shared hold does not conflict with its exclusive request: only other sessions' do.
    const deadline = this.deadline();
    const { rows } = await ask<{ locked: boolean }>(client, deadline, 'SELECT pg_try_advisory_lock($1) AS locked', [PG_DAEMON_LOCK]).catch((error: unknown) => {
      throw postgresUnavailable(redactDatabaseUrl(this.url), error, this.timeouts);
    });
    if (!rows[0]?.locked) throw databaseInUse(await holders(client, 'ShareLock', deadline));
    return async () => {
      await ask(client, deadline, 'SELECT pg_advisory_unlock($1)', [PG_DAEMON_LOCK]).catch(() => undefined);
    };
  }

  async release(): Promise<void> {
    this.released = true;
    const client = this.client;
    this.client = undefined;
    if (client) await endPostgresClient(client, END_GRACE_MS);
  }

  private async tryTake(): Promise<{ taken: true } | { taken: false; holder: string }> {
    const client = newPostgresClient(this.url, processApplicationName(DAEMON_APPLICATION_NAME), this.timeouts);
    try {
      await client.connect();
    } catch (error) {
      throw postgresUnavailable(redactDatabaseUrl(this.url), error, this.timeouts);
    }
    let locked: boolean;
    try {
      locked = (await ask<{ locked: boolean }>(client, this.deadline(), 'SELECT pg_try_advisory_lock_shared($1) AS locked', [PG_DAEMON_LOCK])).rows[0]?.locked === true;
    } catch (error) {
      await endPostgresClient(client, END_GRACE_MS);
      throw postgresUnavailable(redactDatabaseUrl(this.url), error, this.timeouts);
    }
    if (!locked) {
      const holder = (await holders(client, 'ExclusiveLock', this.deadline())) ?? 'a restore';
      await endPostgresClient(client, END_GRACE_MS);
      return { taken: false, holder };
    }
    this.client = client;
    client.once('end', () => this.lost(client));
    this.watch(client);
    return { taken: true };
  }

  /**
   * Every CHECK_MS, a statement that must be answered within the query timeout; a
   * connection that does not answer is dropped, and the lock counts as lost (onLost): this
   * session may still hold it on the server, or may not, and the daemon cannot tell.
   */
  private watch(client: pg.Client): void {
    let checking = false;
    const timer = setInterval(() => {
      if (checking) return;
      checking = true;
      // A statement that fails otherwise has lost the connection already: its 'end' follows.
      void ask(client, this.deadline(), 'SELECT 1')
        .catch(() => undefined)
        .finally(() => (checking = false));
    }, CHECK_MS);
    timer.unref();
    client.once('end', () => clearInterval(timer));
  }

  /** Milliseconds a statement on the lock's connection may take: the query timeout, or its default where there is none. */
  private deadline(): number {
    return (this.timeouts.queryTimeout || DEFAULT_POSTGRES_TIMEOUTS.queryTimeout) * 1000;
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
  const client = newPostgresClient(url, processApplicationName('license-server restore'));
  try {
    await client.connect();
  } catch {
    return async () => undefined;
  }
  const deadline = DEFAULT_POSTGRES_TIMEOUTS.queryTimeout * 1000;
  const { rows } = await ask<{ locked: boolean }>(client, deadline, 'SELECT pg_try_advisory_lock($1) AS locked', [PG_DAEMON_LOCK]).catch(async (error: unknown) => {
    await endPostgresClient(client, END_GRACE_MS);
    throw postgresUnavailable(redactDatabaseUrl(url), error);
  });
  if (!rows[0]?.locked) {
    const error = databaseInUse(await holders(client, 'ShareLock', deadline));
    await endPostgresClient(client, END_GRACE_MS);
    throw error;
  }
  return () => endPostgresClient(client, END_GRACE_MS);
}

/**
 * `license-server serve (pid 4242 on app1)`: the application_name of a lock's connection
 * names the process that holds it, for the DATABASE_IN_USE message (what SQLite keeps in
 * `<database>.serve`). PostgreSQL keeps 63 bytes of it: a longer host name is cut, marked `..`.
 */
export function processApplicationName(role: string, pid: number = process.pid, host: string = hostname()): string {
  const head = `${role} (pid ${pid} on `;
  const whole = `${head}${host})`;
  return whole.length <= APPLICATION_NAME_MAX ? whole : `${head}${host.slice(0, APPLICATION_NAME_MAX - head.length - 3)}..)`;
}

const APPLICATION_NAME_MAX = 63;
const PROCESS_NAME = /^(.*) \(pid (\d+) on (.+)\)$/;

/** Who else holds the daemon lock in `mode`: their backend pids and client addresses. */
async function holders(client: pg.Client, mode: 'ShareLock' | 'ExclusiveLock', deadline: number): Promise<string | undefined> {
  const { rows } = await ask<{ pid: number; addr: string | null; app: string }>(
    client,
    deadline,
    `SELECT a.pid, host(a.client_addr) AS addr, a.application_name AS app
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.mode = $2 AND l.pid <> pg_backend_pid()
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid::bigint = 0 AND l.objid::bigint = $1 AND l.objsubid = 1
      ORDER BY a.pid`,
    [PG_DAEMON_LOCK, mode],
  ).catch(() => ({ rows: [] }));
  if (rows.length === 0) return undefined;
  return `${rows.length} holder(s): ${rows.map(describeSession).join('; ')}`;
}

/**
 * A session of pg_stat_activity in words: the process its application_name names
 * (processApplicationName), and where it connected from.
 */
export function describeSession(row: { readonly pid: number; readonly addr: string | null; readonly app: string | null }): string {
  const from = `connected from ${row.addr ?? 'a local socket'} as server pid ${row.pid}`;
  const owner = PROCESS_NAME.exec(row.app ?? '');
  // A holder of an older release, or a session of someone else's, is named by what it said.
  return owner ? `${owner[1]}: process ${owner[2]} on ${owner[3]}, ${from}` : `${row.app || 'a session'}, ${from}`;
}

/**
 * A statement on a lock's connection, answered within `ms`, or the connection is dropped (its
 * 'end' follows). In turn: the check every CHECK_MS may be running when a restore asks.
 */
function ask<R extends pg.QueryResultRow>(client: pg.Client, ms: number, sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
  return withDeadline(inTurn(client, () => client.query<R>(sql, params)), ms, () => {
    dropPostgresClient(client);
    return new Error(`no answer within ${ms / 1000} s`);
  });
}
