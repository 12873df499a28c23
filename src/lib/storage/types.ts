import type { PoolStats } from './observer.js';

export type Engine = 'sqlite' | 'postgres';

/** What a query may bind. Booleans and Dates are converted per engine by the adapters. */
export type SqlValue = string | number | bigint | boolean | Date | Uint8Array | null;

export type Row = Record<string, unknown>;

/**
 * Runs SQL written once for both engines: `?` placeholders, standard SQL, and only the
 * features both SQLite (3.35+) and PostgreSQL (12+) share, such as RETURNING and
 * ON CONFLICT DO NOTHING. Values come back as the engine gives them; the record modules
 * normalise them (see ./values.ts).
 */
export interface Queryable {
  query<R extends Row = Row>(sql: string, params?: readonly SqlValue[]): Promise<R[]>;
  /** Runs a statement and returns the number of rows it changed. */
  execute(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

export interface TransactionOptions {
  /**
   * No statement or query timeout (PostgreSQL; SQLite has none): for migrations, which may
   * rewrite a whole table or wait for another process's migration.
   */
  readonly unbounded?: boolean;
}

export interface Database extends Queryable {
  readonly engine: Engine;
  /** Where the data lives, safe to print (URL passwords redacted). */
  readonly location: string;
  /**
   * Runs `fn` in one transaction that holds the write lock from its first statement
   * (SQLite: BEGIN IMMEDIATE), committing when it resolves and rolling back when it throws.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
  /**
   * Resolves while the store takes writes, as far as this process knows; after a write it
   * refused for want of space, DATABASE_DISK_FULL until a probe write finds room again
   * (write-refusals.ts). For /readyz; nothing is written while no write has failed.
   */
  checkWrites?(): Promise<void>;
  /** PostgreSQL: its pool's connections now, for the daemon's metrics; engines without a pool have none. */
  poolStats?(): PoolStats;
}
