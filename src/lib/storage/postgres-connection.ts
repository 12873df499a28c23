import pg from 'pg';

/**
 * How long a connection waits for PostgreSQL, in seconds (0: no limit): the settings
 * database.connect_timeout, database.statement_timeout and database.query_timeout
 * (docs/configuration.md, "PostgreSQL timeouts").
 */
export interface PostgresTimeouts {
  /** To open a connection, or to get a free one from the pool. */
  readonly connectTimeout: number;
  /** The server cancels a statement that runs longer (SQLSTATE 57014). */
  readonly statementTimeout: number;
  /** The answer to one statement; past it the connection is given up (a server or network that stopped answering). */
  readonly queryTimeout: number;
  /** The setting that set statementTimeout, for messages (default database.statement_timeout). */
  readonly statementTimeoutSetting?: string;
}

/** The defaults of the settings (config/schema.ts). */
export const DEFAULT_POSTGRES_TIMEOUTS: PostgresTimeouts = { connectTimeout: 5, statementTimeout: 10, queryTimeout: 15 };

// The kernel probes a connection idle this long: a server host that vanished without a
// word (powered off, a route dropped) is then noticed without a statement to time out.
const KEEPALIVE_IDLE_MS = 10_000;

const ignore = (): void => undefined;

/** Tracks the clients of each pool, so that close can drop the sockets of those that will not end. */
const poolClients = new WeakMap<pg.Pool, Set<pg.Client>>();

/**
 * The settings every connection of ours shares: a name in pg_stat_activity, a bounded wait
 * to connect, TCP keepalive, the statement timeout when there is one, and no JIT. PostgreSQL
 * compiles a statement whose estimated cost passes jit_above_cost, and a LIMIT over a filtered
 * index walk is estimated as the whole walk: a console list page at a million licenses took
 * 168 ms to compile and 0.75 ms to run (issue 36). Our statements are small and read by
 * index; none gains from JIT. Sent as a startup option, as statement_timeout is (a URL's own
 * `options` replaces it).
 */
function connectionConfig(url: string, applicationName: string, timeouts: Partial<PostgresTimeouts>): pg.ClientConfig {
  return {
    connectionString: url,
    application_name: applicationName,
    connectionTimeoutMillis: (timeouts.connectTimeout ?? DEFAULT_POSTGRES_TIMEOUTS.connectTimeout) * 1000,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    ...(timeouts.statementTimeout ? { statement_timeout: timeouts.statementTimeout * 1000 } : {}),
    options: '-c jit=off',
  };
}

/**
 * A connection of its own (a lock's, a dump's, a restore's). pg emits 'error' on a client
 * whose connection drops (a terminated backend, a server restart, a reset) whatever it is
 * doing, and an 'error' event nobody listens to ends the process: this one always has a
 * listener, and the failure reaches its user through the query that was waiting, or the
 * next one ("not queryable"). Not connected yet.
 */
export function newPostgresClient(url: string, applicationName: string, timeouts: Partial<PostgresTimeouts> = {}): pg.Client {
  const client = new pg.Client(connectionConfig(url, applicationName, timeouts));
  client.on('error', ignore);
  return client;
}

/**
 * A pool whose every client has an error listener, always. pg-pool listens on its idle
 * clients only, and removes that listener from a client it hands out: a connection that
 * dropped while checked out (inside a transaction, between two of its statements) emitted
 * an 'error' nobody listened to, and the daemon died under load (issue 23). The failure
 * still reaches the statement that was waiting (and pg-pool drops the client on release).
 */
export function newPostgresPool(url: string, applicationName: string, timeouts: Partial<PostgresTimeouts>, options: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool({ ...connectionConfig(url, applicationName, timeouts), ...options });
  const clients = new Set<pg.Client>();
  poolClients.set(pool, clients);
  pool.on('error', ignore);
  pool.on('connect', (client) => {
    client.on('error', ignore);
    clients.add(client);
    client.once('end', () => clients.delete(client));
  });
  return pool;
}

/**
 * Ends a pool: waits for its clients to be released and say goodbye, but no longer than
 * `graceMs`; the sockets of those still open then are dropped. A server that stopped
 * answering never acknowledges a goodbye, and pg would wait for it forever.
 */
export async function endPostgresPool(pool: pg.Pool, graceMs: number): Promise<void> {
  const ended = pool.end().catch(ignore);
  if (await settlesWithin(ended, graceMs)) return;
  for (const client of poolClients.get(pool) ?? []) client.connection.stream.destroy();
}

/** Ends a client; drops its socket if the server does not answer the goodbye within `graceMs`. */
export async function endPostgresClient(client: pg.Client, graceMs: number): Promise<void> {
  if (await settlesWithin(client.end().catch(ignore), graceMs)) return;
  client.connection.stream.destroy();
}

/** Drops a client's connection at once, as a failure of its own (its 'end' follows). */
export function dropPostgresClient(client: pg.Client): void {
  client.connection.stream.destroy();
}

/** Per connection, the last statement sent on it, answered or not (inTurn). */
const lastStatement = new WeakMap<pg.ClientBase, Promise<unknown>>();

/**
 * Sends a statement on `client` (calls `send`) once every statement sent on it before has
 * been answered or has failed. pg queues a statement sent while another runs, and warns that
 * this is deprecated (pg 9 will throw); yet the callers of one transaction may ask for
 * several at once (Promise.all over tx.query), as SQLite's allows. They take turns here. A
 * statement that is never answered holds up those behind it until its connection is dropped
 * (each caller's own deadline still runs); they then fail at once on the dead connection.
 */
export function inTurn<T>(client: pg.ClientBase, send: () => Promise<T>): Promise<T> {
  const previous = lastStatement.get(client);
  const mine = previous ? previous.then(send, send) : send();
  lastStatement.set(client, mine.catch(ignore));
  return mine;
}

/**
 * `work`, or `timedOut()` once `ms` have passed without an answer (0: no limit). The work
 * goes on (its eventual failure is swallowed): the caller drops its connection.
 */
export function withDeadline<T>(work: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  if (!(ms > 0)) return work;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  work.catch(ignore);
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = await Promise.race([work.then(() => true), expired]);
  clearTimeout(timer);
  return settled;
}
