import pg from 'pg';
import { LicenseServerError } from '../errors.js';
import { redactDatabaseUrl } from '../config/redact.js';
import { toNumberedPlaceholders } from './placeholders.js';
import { DEFAULT_POSTGRES_TIMEOUTS, endPostgresPool, inTurn, newPostgresPool, withDeadline, type PostgresTimeouts } from './postgres-connection.js';
import type { PoolStats } from './observer.js';
import { PROBE_BYTES, WriteRefusals } from './write-refusals.js';
import type { Database, Queryable, Row, SqlValue, TransactionOptions } from './types.js';

// int8 (COUNT, BIGINT columns, identity ids) as a number rather than pg's default string.
// Local to our pool so that an application embedding this module keeps its own parsers.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 && format !== 'binary' ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * Error codes that mean the server is gone, refuses us or gave up on the statement, as
 * opposed to a bad statement: class 08 (connection exception), 57P0x and 25P03 (the server
 * shutting down, or the session ended by an administrator or a timeout), 57014 (the
 * statement cancelled: database.statement_timeout), and the server short of a resource
 * other than disk (class 53, "insufficient resources"): 53200 out of memory, 53300 too many
 * connections, 53400 a limit of its configuration (temp_file_limit, max_locks_per_transaction
 * ...). Those pass, or are the operator's to raise; none is a fault of the statement.
 * 53100 (disk full) is DATABASE_DISK_FULL. Class 54 (program limits: too many columns or
 * arguments, a statement too complex) is a statement of ours that should not have been
 * written: it stays a bug (INTERNAL).
 */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE',
  '57P01', '57P02', '57P03', '57P05', '57014', '25P03', '3D000', '28P01', '28000', '53200', '53300', '53400',
]);
const CONNECTION_CLASSES = ['08'];

/** disk_full: the server could not extend a table, an index or a temporary file. */
const DISK_FULL = '53100';

/** deadlock_detected and serialization_failure: the transaction was rolled back and may be run again. */
const RETRYABLE_CODES = new Set(['40P01', '40001']);
const TRANSACTION_ATTEMPTS = 4;

export interface PostgresOpenOptions {
  readonly applicationName?: string;
  readonly timeouts?: PostgresTimeouts;
  /** Connections at most (default 10). */
  readonly poolSize?: number;
}

export class PostgresDatabase implements Database {
  readonly engine = 'postgres' as const;
  readonly location: string;
  private closed: Promise<void> | undefined;
  /** Writes the server refused for want of space, until a probe finds room (write-refusals.ts). */
  private readonly writes = new WriteRefusals(() => this.probeWrite());

  private constructor(
    url: string,
    private readonly pool: pg.Pool,
    private readonly timeouts: PostgresTimeouts,
  ) {
    this.location = redactDatabaseUrl(url);
  }

  /** Connects, and fails at once with DATABASE_UNAVAILABLE when the server cannot be used. */
  static async open(url: string, options: PostgresOpenOptions = {}): Promise<PostgresDatabase> {
    const timeouts = options.timeouts ?? DEFAULT_POSTGRES_TIMEOUTS;
    const pool = newPostgresPool(url, options.applicationName ?? 'license-server', timeouts, { max: options.poolSize ?? 10, idleTimeoutMillis: 10_000, types });
    const database = new PostgresDatabase(url, pool, timeouts);
    try {
      await database.query('SELECT 1');
    } catch (error) {
      await database.close();
      throw error instanceof LicenseServerError ? error : database.unavailable(error);
    }
    return database;
  }

  /** Resolves while the server takes writes; DATABASE_DISK_FULL after a write it refused for want of space, until a probe finds room. */
  checkWrites(): Promise<void> {
    return this.writes.check();
  }

  poolStats(): PoolStats {
    return { total: this.pool.totalCount, inUse: this.pool.totalCount - this.pool.idleCount, waiting: this.pool.waitingCount };
  }

  query<R extends Row = Row>(sql: string, params?: readonly SqlValue[]): Promise<R[]> {
    return this.withClient((client) => this.run(client, sql, params)).then((result) => result.rows as R[]);
  }

  execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.withClient((client) => this.run(client, sql, params)).then((result) => result.rowCount ?? 0);
  }

  /**
   * A transaction the server ended to break a deadlock (40P01) or a serialization failure
   * (40001) is run again from the start, up to TRANSACTION_ATTEMPTS times: its work was
   * rolled back whole, and the other party went on. Under the licenses' row locks such a
   * cycle is rare but real: PostgreSQL keeps the row lock an UPDATE took while waiting for a
   * concurrent writer even when the row then fails the UPDATE's WHERE, so a validation that
   * finds its seat gone meanwhile holds the machine's row as it asks for the license's,
   * the reverse of a deactivation's order. `fn` must therefore do nothing but database work
   * that can be repeated (every caller's does).
   */
  async transaction<T>(fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.transactionOnce(fn, options);
      } catch (error) {
        if (attempt >= TRANSACTION_ATTEMPTS || !RETRYABLE_CODES.has((error as { code?: string }).code ?? '')) throw error;
        // Apart, so that the same two do not meet again at the same instant.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
      }
    }
  }

  private async transactionOnce<T>(fn: (tx: Queryable) => Promise<T>, options: TransactionOptions): Promise<T> {
    // A migration may rewrite a whole table, or wait for another process's: no limit.
    const deadline = options.unbounded ? 0 : undefined;
    return this.withClient(async (client, drop) => {
      const tx: Queryable = {
        query: <R extends Row>(sql: string, params?: readonly SqlValue[]) =>
          this.run(client, sql, params, deadline).then((result) => result.rows as R[]),
        execute: (sql: string, params?: readonly SqlValue[]) =>
          this.run(client, sql, params, deadline).then((result) => result.rowCount ?? 0),
      };
      await this.run(client, 'BEGIN');
      try {
        if (options.unbounded) await this.run(client, 'SET LOCAL statement_timeout = 0');
        const result = await fn(tx);
        await this.run(client, 'COMMIT', [], deadline);
        return result;
      } catch (error) {
        // A connection that failed is dropped on release, and the server rolls back with it;
        // a ROLLBACK sent after a statement that never answered would wait behind it.
        if (!isUnavailable(error)) await this.run(client, 'ROLLBACK').catch(drop);
        throw error;
      }
    });
  }

  /**
   * PROBE_BYTES into a temporary table, rolled back: the table, and the file PostgreSQL
   * extends for it, go with the transaction. PostgreSQL puts it in temp_tablespaces, or else
   * the database's tablespace, where its tables are unless they were moved.
   */
  private probeWrite(): Promise<void> {
    return this.withClient(async (client, drop) => {
      await this.run(client, 'BEGIN');
      try {
        await this.run(client, 'CREATE TEMPORARY TABLE license_server_write_probe (filler text) ON COMMIT DROP');
        // Rows of 1 KiB stay uncompressed in the table's own pages (TOAST starts at 2 KiB).
        await this.run(client, `INSERT INTO license_server_write_probe SELECT repeat('x', 1024) FROM generate_series(1, ${PROBE_BYTES / 1024})`);
      } catch (error) {
        // As in a transaction: a connection that failed is dropped, and the server rolls back with it.
        if (!isUnavailable(error)) await this.run(client, 'ROLLBACK').catch(drop);
        throw error;
      }
      await this.run(client, 'ROLLBACK');
    });
  }

  /** Waits for the statements in flight (at most the connect timeout), then drops what is left. */
  close(): Promise<void> {
    this.closed ??= endPostgresPool(this.pool, Math.max(1, this.timeouts.connectTimeout) * 1000);
    return this.closed;
  }

  /**
   * A pooled client for `work`, released afterwards: dropped when the connection failed or
   * a statement went unanswered, kept otherwise. Waiting for one is bounded by the connect
   * timeout (pg-pool's connectionTimeoutMillis covers the queue too).
   */
  private async withClient<T>(work: (client: pg.PoolClient, drop: () => void) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw this.unavailable(error);
    }
    let broken = false;
    try {
      return await work(client, () => (broken = true));
    } catch (error) {
      broken ||= isUnavailable(error);
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** One statement, answered within the query timeout (or `deadline` seconds; 0: none) or DATABASE_UNAVAILABLE. */
  private async run(client: pg.PoolClient, sql: string, params: readonly SqlValue[] = [], deadline = this.timeouts.queryTimeout): Promise<pg.QueryResult> {
    try {
      return await withDeadline(inTurn(client, () => client.query(toNumberedPlaceholders(sql), params.map(toPostgres))), deadline * 1000, () =>
        this.unavailable(new Error(`query read timeout`), `no answer within ${deadline} s (database.query_timeout)`));
    } catch (error) {
      throw this.writes.note(this.translate(error));
    }
  }

  private translate(error: unknown): unknown {
    if (error instanceof LicenseServerError) return error;
    const code = (error as { code?: string }).code;
    if (code === DISK_FULL) {
      const said = ((error as Error).message ?? '').split('\n')[0];
      return new LicenseServerError('DATABASE_DISK_FULL', `the PostgreSQL server ${this.location} has no disk space left for this write (${code}: ${said}); nothing was changed`, {
        cause: error,
      });
    }
    // pg reports a lost or timed-out connection as a plain Error without a code.
    const lost = code === undefined && /timeout|Connection terminated|not queryable|after calling end on the pool/i.test((error as Error).message ?? '');
    if ((code !== undefined && (CONNECTION_CODES.has(code) || CONNECTION_CLASSES.includes(code.slice(0, 2)))) || lost) {
      return this.unavailable(error);
    }
    return error;
  }

  private unavailable(error: unknown, reason?: string): LicenseServerError {
    return postgresUnavailable(this.location, error, this.timeouts, reason);
  }
}

function isUnavailable(error: unknown): boolean {
  return error instanceof LicenseServerError && error.code === 'DATABASE_UNAVAILABLE';
}

/** DATABASE_UNAVAILABLE for a connection that failed, with the reason in words. `location` is redacted. */
export function postgresUnavailable(location: string, error: unknown, timeouts: PostgresTimeouts = DEFAULT_POSTGRES_TIMEOUTS, reason?: string): LicenseServerError {
  const code = (error as { code?: string }).code;
  const message = (error as Error).message ?? '';
  reason ??= code === '3D000' ? 'the database does not exist'
    : code === '28P01' || code === '28000' ? 'authentication failed'
    : code === 'ECONNREFUSED' ? 'connection refused'
    : code === '57014' ? `a statement was cancelled (${timeouts.statementTimeoutSetting ?? 'database.statement_timeout'} is ${timeouts.statementTimeout} s)`
    : code === '57P01' || code === '57P02' || code === '57P03' ? 'the server is shutting down, restarting or ended the session'
    : code === '53200' ? `the server is out of memory (53200: ${message.split('\n')[0]})`
    : code === '53300' ? `the server has no connection to spare (53300: ${message.split('\n')[0]})`
    : code === '53400' ? `a limit of the server's configuration was reached (53400: ${message.split('\n')[0]})`
    : /timeout/i.test(message) ? `no connection within ${timeouts.connectTimeout} s (database.connect_timeout)`
    : /Connection terminated|not queryable|ECONNRESET/i.test(message) || code === 'ECONNRESET' ? 'the connection was lost'
    : code ?? 'connection failed';
  return new LicenseServerError('DATABASE_UNAVAILABLE', `cannot use the PostgreSQL database ${location}: ${reason}`, {
    cause: error,
  });
}

function toPostgres(value: SqlValue): unknown {
  if (value instanceof Uint8Array && !Buffer.isBuffer(value)) return Buffer.from(value);
  if (typeof value === 'bigint') return value.toString();
  return value;
}
