import pg from 'pg';
import { LicenseServerError } from '../errors.js';
import { redactDatabaseUrl } from '../config/redact.js';
import { toNumberedPlaceholders } from './placeholders.js';
import type { Database, Queryable, Row, SqlValue } from './types.js';

const CONNECT_TIMEOUT_MS = 5000;

// int8 (COUNT, BIGINT columns, identity ids) as a number rather than pg's default string.
// Local to our pool so that an application embedding this module keeps its own parsers.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 && format !== 'binary' ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** Error codes that mean the server is gone or refuses us, as opposed to a bad statement. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE',
  '57P01', '57P02', '57P03', '3D000', '28P01', '28000', '53300', '08001', '08006',
]);

export class PostgresDatabase implements Database {
  readonly engine = 'postgres' as const;
  readonly location: string;
  private readonly pool: pg.Pool;

  private constructor(url: string, pool: pg.Pool) {
    this.location = redactDatabaseUrl(url);
    this.pool = pool;
  }

  /** Connects, and fails at once with DATABASE_UNAVAILABLE when the server cannot be used. */
  static async open(url: string, applicationName = 'license-server'): Promise<PostgresDatabase> {
    const pool = new pg.Pool({
      connectionString: url,
      max: 10,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      idleTimeoutMillis: 10_000,
      application_name: applicationName,
      types,
    });
    // An idle client that loses its connection emits here; without a listener the process dies.
    pool.on('error', () => undefined);
    const database = new PostgresDatabase(url, pool);
    try {
      await pool.query('SELECT 1');
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw database.unavailable(error);
    }
    return database;
  }

  query<R extends Row = Row>(sql: string, params?: readonly SqlValue[]): Promise<R[]> {
    return this.run(this.pool, sql, params).then((result) => result.rows as R[]);
  }

  execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.run(this.pool, sql, params).then((result) => result.rowCount ?? 0);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw this.unavailable(error);
    }
    const tx: Queryable = {
      query: <R extends Row>(sql: string, params?: readonly SqlValue[]) =>
        this.run(client, sql, params).then((result) => result.rows as R[]),
      execute: (sql: string, params?: readonly SqlValue[]) =>
        this.run(client, sql, params).then((result) => result.rowCount ?? 0),
    };
    let broken = false;
    try {
      await client.query('BEGIN');
      const result = await fn(tx);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true;
      }
      throw this.translate(error);
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private async run(runner: pg.Pool | pg.PoolClient, sql: string, params: readonly SqlValue[] = []): Promise<pg.QueryResult> {
    try {
      return await runner.query(toNumberedPlaceholders(sql), params.map(toPostgres));
    } catch (error) {
      throw this.translate(error);
    }
  }

  private translate(error: unknown): unknown {
    if (error instanceof LicenseServerError) return error;
    const code = (error as { code?: string }).code;
    // pg reports a lost or timed-out connection as a plain Error without a code.
    const lost = code === undefined && /timeout|Connection terminated|not queryable/i.test((error as Error).message ?? '');
    if ((code !== undefined && CONNECTION_CODES.has(code)) || lost) {
      return this.unavailable(error);
    }
    return error;
  }

  private unavailable(error: unknown): LicenseServerError {
    return postgresUnavailable(this.location, error);
  }
}

/** DATABASE_UNAVAILABLE for a connection that failed, with the reason in words. `location` is redacted. */
export function postgresUnavailable(location: string, error: unknown): LicenseServerError {
  const code = (error as { code?: string }).code;
  const reason = code === '3D000' ? 'the database does not exist'
    : code === '28P01' || code === '28000' ? 'authentication failed'
    : code === 'ECONNREFUSED' ? 'connection refused'
    : /timeout/i.test((error as Error).message ?? '') ? `no answer within ${CONNECT_TIMEOUT_MS} ms`
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
