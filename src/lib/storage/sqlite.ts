import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { LicenseServerError } from '../errors.js';
import { describeFsError } from '../fs-errors.js';
import type { Database, Queryable, Row, SqlValue } from './types.js';

type Statement = BetterSqlite3.Statement<unknown[], Row>;

const BUSY_TIMEOUT_MS = 5000;

/**
 * better-sqlite3 behind the async Database interface. The driver is synchronous and one
 * connection serves the whole process, so transactions are serialised by a promise queue:
 * while one is open, other callers wait instead of running inside it.
 */
export class SqliteDatabase implements Database {
  readonly engine = 'sqlite' as const;
  readonly location: string;
  private readonly db: BetterSqlite3.Database;
  private readonly statements = new Map<string, Statement>();
  private queue: Promise<unknown> = Promise.resolve();
  private readonly direct: Queryable;

  private constructor(file: string, db: BetterSqlite3.Database) {
    this.location = file;
    this.db = db;
    this.direct = {
      query: async <R extends Row>(sql: string, params?: readonly SqlValue[]) => this.all(sql, params) as R[],
      execute: async (sql: string, params?: readonly SqlValue[]) => this.run(sql, params),
    };
  }

  /** Opens (creating it 0600 in a 0700 directory when missing) the database file. */
  static open(file: string): SqliteDatabase {
    const unavailable = (error: unknown): never => {
      throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot open the SQLite database ${file}: ${describeFsError(error)}`, {
        cause: error,
      });
    };
    try {
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      // SQLite gives the -wal and -shm files the mode of the main file, so this covers all three.
      closeSync(openSync(file, 'a', 0o600));
    } catch (error) {
      unavailable(error);
    }
    let db: BetterSqlite3.Database;
    try {
      db = new BetterSqlite3(file, { timeout: BUSY_TIMEOUT_MS });
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma('foreign_keys = ON');
    } catch (error) {
      return unavailable(error);
    }
    return new SqliteDatabase(file, db);
  }

  query<R extends Row = Row>(sql: string, params?: readonly SqlValue[]): Promise<R[]> {
    return this.serialised(() => this.all(sql, params) as R[]);
  }

  execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.serialised(() => this.run(sql, params));
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.serialised(async () => {
      this.run('BEGIN IMMEDIATE');
      try {
        const result = await fn(this.direct);
        this.run('COMMIT');
        return result;
      } catch (error) {
        if (this.db.inTransaction) this.run('ROLLBACK');
        throw error;
      }
    });
  }

  async close(): Promise<void> {
    await this.queue.catch(() => undefined);
    if (this.db.open) this.db.close();
  }

  private serialised<T>(work: () => T | Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private prepare(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = translateErrors(() => this.db.prepare<unknown[], Row>(sql));
      this.statements.set(sql, statement);
    }
    return statement;
  }

  private all(sql: string, params: readonly SqlValue[] = []): Row[] {
    const statement = this.prepare(sql);
    const bound = params.map(toSqlite);
    return translateErrors(() => (statement.reader ? statement.all(...bound) : (statement.run(...bound), [])));
  }

  private run(sql: string, params: readonly SqlValue[] = []): number {
    const statement = this.prepare(sql);
    const bound = params.map(toSqlite);
    return translateErrors(() => (statement.reader ? (statement.all(...bound), 0) : statement.run(...bound).changes));
  }
}

function toSqlite(value: SqlValue): unknown {
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array && !Buffer.isBuffer(value)) return Buffer.from(value);
  return value;
}

function translateErrors<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    const code = (error as { code?: string }).code ?? '';
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
      throw new LicenseServerError('DATABASE_UNAVAILABLE', `the SQLite database stayed locked for ${BUSY_TIMEOUT_MS} ms`, {
        cause: error,
      });
    }
    if (code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_IOERR' || code === 'SQLITE_FULL') {
      throw new LicenseServerError('DATABASE_UNAVAILABLE', `the SQLite database cannot be written: ${(error as Error).message}`, {
        cause: error,
      });
    }
    throw error;
  }
}
