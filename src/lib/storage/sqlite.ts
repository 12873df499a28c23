import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { keyIdOf } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import { describeFsError } from '../fs-errors.js';
import { storeAccessDenied } from './file-access.js';
import { toSqlite } from './sqlite-bind.js';
import { loadSqliteDriver } from './sqlite-driver.js';
import { isSqliteBusy, type StorageObserver } from './observer.js';
import { SqliteReader, type SqliteReaderOptions } from './sqlite-reader.js';
import type { Database, Queryable, Row, SqlValue } from './types.js';
import { PROBE_BYTES, WriteRefusals } from './write-refusals.js';

type Statement = BetterSqlite3.Statement<unknown[], Row>;

const BUSY_TIMEOUT_MS = 5000;

/**
 * better-sqlite3 behind the async Database interface. The driver is synchronous, so a
 * second connection to the same file in the same process would block the event loop on
 * the first one's write lock forever. Every open of one file in a process therefore shares
 * one connection, and its transactions are serialised by a promise queue: while one is
 * open, other callers wait instead of running inside it. Other processes are kept apart
 * by SQLite's own locking (BEGIN IMMEDIATE plus a busy timeout).
 */
export class SqliteDatabase implements Database {
  readonly engine = 'sqlite' as const;
  readonly location: string;
  private closed = false;

  private constructor(
    private readonly connection: SharedConnection,
    private readonly observer: StorageObserver | undefined,
  ) {
    this.location = connection.file;
  }

  /**
   * Opens the database file, creating it 0600 in a 0700 directory when missing, unless
   * `create` is false: then a missing file is an error and nothing is created.
   */
  static open(file: string, options: { create?: boolean; serving?: boolean; checkpointsByLitestream?: boolean; observer?: StorageObserver } = {}): SqliteDatabase {
    const key = path.resolve(file);
    let connection = connections.get(key);
    if (!connection) {
      const { db, identity } = openConnection(key, options.create !== false);
      connection = new SharedConnection(key, db, identity);
      connections.set(key, connection);
    }
    if (options.serving) useServingCache(connection.db);
    if (options.checkpointsByLitestream) connection.db.pragma('wal_autocheckpoint = 0');
    connection.handles += 1;
    return new SqliteDatabase(connection, options.observer);
  }

  query<R extends Row = Row>(sql: string, params?: readonly SqlValue[]): Promise<R[]> {
    return this.observed(this.live().serialised(() => {
      this.connection.checkSameFile();
      return this.connection.all(sql, params) as R[];
    }));
  }

  execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.observed(this.live().serialised(() => {
      this.connection.checkSameFile();
      return this.connection.run(sql, params);
    }));
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.observed(this.live().transaction(fn));
  }

  /** Resolves while the file system takes writes; DATABASE_DISK_FULL after a write refused for want of space, until a probe finds room. */
  checkWrites(): Promise<void> {
    return this.live().writes.check();
  }

  /** Tells the observer of a lock wait that ran out; the caller still gets the error. */
  private observed<T>(work: Promise<T>): Promise<T> {
    if (!this.observer?.sqliteBusy) return work;
    return work.catch((error: unknown) => {
      if (isSqliteBusy(error)) this.observer!.sqliteBusy!();
      throw error;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const connection = this.connection;
    connection.handles -= 1;
    if (connection.handles > 0) return;
    connections.delete(connection.file);
    await connection.queue.catch(() => undefined);
    if (connection.isReplaced()) {
      // Closing would checkpoint into the old file, then delete the -wal and -shm files by
      // name: those of the file now at the path. The handle is left to the process's end.
      return;
    }
    if (connection.db.open) connection.db.close();
  }

  /**
   * This database with its reads outside a transaction (`query`) answered by a reader
   * thread (sqlite-reader.ts), for requests that may read a lot: the daemon's admin GET
   * routes. Writes and transactions stay on this connection. Closing it stops the thread
   * and leaves this handle open.
   */
  withOffloadedReads(options: Omit<SqliteReaderOptions, 'busyTimeoutMs'>): Database {
    return new OffloadedReads(this, this.connection, new SqliteReader(this.connection.file, { ...options, busyTimeoutMs: BUSY_TIMEOUT_MS }));
  }

  private live(): SharedConnection {
    if (this.closed) throw new Error('database handle used after close()');
    return this.connection;
  }
}

class OffloadedReads implements Database {
  readonly engine = 'sqlite' as const;
  readonly location: string;

  constructor(
    private readonly primary: SqliteDatabase,
    private readonly connection: SharedConnection,
    private readonly reader: SqliteReader,
  ) {
    this.location = primary.location;
  }

  async query<R extends Row = Row>(sql: string, params: readonly SqlValue[] = []): Promise<R[]> {
    // The reader's connection opened the file at the path, which may be another by now.
    this.connection.checkSameFile();
    let rows: Row[] | undefined;
    try {
      rows = await this.reader.query(sql, params);
    } catch (error) {
      translateErrors(() => {
        throw error;
      });
    }
    return (rows ?? (await this.primary.query(sql, params))) as R[];
  }

  execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.primary.execute(sql, params);
  }

  checkWrites(): Promise<void> {
    return this.primary.checkWrites();
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.primary.transaction(fn);
  }

  close(): Promise<void> {
    return this.reader.close();
  }
}

const connections = new Map<string, SharedConnection>();

/** At most this many transactions share one commit, so a long queue still commits often. */
const MAX_GROUP = 64;

interface PendingTransaction<T> {
  readonly fn: (tx: Queryable) => Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

class SharedConnection {
  handles = 0;
  queue: Promise<unknown> = Promise.resolve();
  readonly direct: Queryable;
  private readonly statements = new Map<string, Statement>();

  private replaced: LicenseServerError | undefined;
  /** Writes refused for want of space, until a probe beside the file finds room. */
  readonly writes: WriteRefusals;

  constructor(
    readonly file: string,
    readonly db: BetterSqlite3.Database,
    private readonly identity: FileIdentity,
  ) {
    this.direct = {
      query: async <R extends Row>(sql: string, params?: readonly SqlValue[]) => this.all(sql, params) as R[],
      execute: async (sql: string, params?: readonly SqlValue[]) => this.run(sql, params),
    };
    this.writes = new WriteRefusals(() => probeRoomBeside(file));
  }

  /**
   * Refuses to go on with a file that is no longer the one at the path: a restore that
   * ignored the locks, or a hand, renamed another file over it, and what this connection
   * commits would go to a deleted file nobody will ever read. Checked before every read
   * and before every commit; a stat costs about 1 us. Once replaced, always replaced.
   */
  checkSameFile(): void {
    if (this.replaced) throw this.replaced;
    const now = statSync(this.file, { throwIfNoEntry: false });
    if (now && now.ino === this.identity.ino && now.dev === this.identity.dev) return;
    this.replaced = new LicenseServerError(
      'DATABASE_REPLACED',
      `the SQLite database ${this.file} was ${now ? 'replaced by another file' : 'removed'} after this process opened it; nothing more is read from or written to the old file`,
    );
    throw this.replaced;
  }

  isReplaced(): boolean {
    try {
      this.checkSameFile();
      return false;
    } catch {
      return true;
    }
  }

  serialised<T>(work: () => T | Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private readonly waiting: Array<PendingTransaction<unknown>> = [];
  private batchScheduled = false;

  /**
   * Group commit: transactions that queue up while one runs are executed one after another
   * inside a single BEGIN IMMEDIATE ... COMMIT, each in its own SAVEPOINT, so a failing one
   * rolls back alone. The result is the same as running them serially, but they share one
   * commit, the costly part (about 20 us each here). Every caller's promise settles only
   * after the shared COMMIT, so nothing is reported done before it is durable.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ fn, resolve, reject } as PendingTransaction<unknown>);
      if (!this.batchScheduled) {
        this.batchScheduled = true;
        // Start at the end of this turn of the event loop, so that every request whose
        // bytes arrived in it can join the batch; starting at once would commit them one
        // by one.
        setImmediate(() => void this.serialised(() => this.runBatch()));
      }
    });
  }

  private async runBatch(): Promise<void> {
    const batch: Array<PendingTransaction<unknown>> = [];
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    let fatal: unknown;
    try {
      this.run('BEGIN IMMEDIATE');
      while (this.waiting.length > 0 && batch.length < MAX_GROUP) {
        const item = this.waiting.shift()!;
        batch.push(item);
        this.run('SAVEPOINT grouped');
        try {
          outcomes.push({ ok: true, value: await item.fn(this.direct) });
          this.run('RELEASE grouped');
        } catch (error) {
          outcomes[batch.length - 1] = { ok: false, error };
          // Without a transaction, SQLite gave up all of it (disk full, I/O error): nothing stands.
          if (!this.db.inTransaction) throw error;
          this.run('ROLLBACK TO grouped');
          this.run('RELEASE grouped');
        }
      }
      this.checkSameFile();
      this.run('COMMIT');
    } catch (error) {
      fatal = error;
      if (this.db.inTransaction) this.run('ROLLBACK');
    }
    batch.forEach((item, i) => {
      const outcome = outcomes[i];
      if (outcome && !outcome.ok) item.reject(outcome.error);
      else if (fatal !== undefined) item.reject(fatal);
      else item.resolve(outcome?.value);
    });
    if (fatal !== undefined && batch.length === 0) for (const item of this.waiting.splice(0)) item.reject(fatal);
    this.batchScheduled = this.waiting.length > 0;
    if (this.batchScheduled) setImmediate(() => void this.serialised(() => this.runBatch()));
  }

  all(sql: string, params: readonly SqlValue[] = []): Row[] {
    const statement = this.prepare(sql);
    const bound = params.map(toSqlite);
    return this.noted(() => (statement.reader ? statement.all(...bound) : (statement.run(...bound), [])));
  }

  run(sql: string, params: readonly SqlValue[] = []): number {
    const statement = this.prepare(sql);
    const bound = params.map(toSqlite);
    return this.noted(() => (statement.reader ? (statement.all(...bound), 0) : statement.run(...bound).changes));
  }

  /** translateErrors, remembering a write refused for want of space (write-refusals.ts). */
  private noted<T>(work: () => T): T {
    try {
      return translateErrors(work);
    } catch (error) {
      throw this.writes.note(error);
    }
  }

  private prepare(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = translateErrors(() => this.db.prepare<unknown[], Row>(sql));
      this.statements.set(sql, statement);
    }
    return statement;
  }
}

/**
 * PROBE_BYTES written to a file beside the database and removed: where SQLite's writes go
 * (the database, its WAL and journal share the directory's file system). Random bytes, which
 * a compressing or deduplicating file system must store as they are.
 */
async function probeRoomBeside(file: string): Promise<void> {
  const probe = `${file}.write-probe`;
  try {
    await writeFile(probe, randomBytes(PROBE_BYTES), { mode: 0o600 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = `${describeFsError(error)}, writing ${probe}`;
    if (code === 'ENOSPC' || code === 'EDQUOT') throw new LicenseServerError('DATABASE_DISK_FULL', `the file system of the SQLite database ${file} has no room (${reason})`, { cause: error });
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `the SQLite database ${file} cannot be written beside (${reason})`, { cause: error });
  } finally {
    await rm(probe, { force: true }).catch(() => undefined);
  }
}

interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
}

function openConnection(file: string, create: boolean): { db: BetterSqlite3.Database; identity: FileIdentity } {
  const unavailable = (error: unknown): never => {
    // SQLite says only "unable to open database file"; another user's store says more.
    const denied = storeAccessDenied(file, { create, what: 'the SQLite database' });
    if (denied) throw denied;
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot open the SQLite database ${file}: ${describeFsError(error)}`, {
      cause: error,
    });
  };
  if (create) {
    try {
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      // SQLite gives the -wal and -shm files the mode of the main file, so this covers all three.
      closeSync(openSync(file, 'a', 0o600));
    } catch (error) {
      unavailable(error);
    }
  }
  try {
    const Driver = loadSqliteDriver();
    // The same file before and after the open is the file the connection has open.
    let before = statSync(file, { throwIfNoEntry: false });
    let db = new Driver(file, { timeout: BUSY_TIMEOUT_MS, fileMustExist: !create });
    let after = statSync(file);
    for (let attempt = 0; attempt < 3 && !(before && before.ino === after.ino && before.dev === after.dev); attempt += 1) {
      db.close();
      before = after;
      db = new Driver(file, { timeout: BUSY_TIMEOUT_MS, fileMustExist: !create });
      after = statSync(file);
    }
    db.pragma('journal_mode = WAL');
    // In WAL mode NORMAL never corrupts; a power cut may lose the last commits, a crash does not.
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    // A replaced or deleted private signing key (protect, retire) must not linger in free space.
    db.pragma('secure_delete = ON');
    addSqlFunctions(db);
    return { db, identity: { dev: after.dev, ino: after.ino } };
  } catch (error) {
    return unavailable(error);
  }
}

/**
 * The daemon's connection reads a few pages per validation from all over the licenses,
 * machines and grants tables and their indexes. The driver's default page cache (16 MB) stops
 * holding them at about 100k licenses: at 1M licenses (4.7 GB) a validation made 10 read
 * syscalls where it made 1 at 10k licenses, and cost 17% more CPU (docs/performance.md,
 * "Validation as the store grows"). 64 MiB of cache holds the pages of a thousand licenses
 * in use; memory-mapping the first 2 GiB of the file (the driver's build maximum) serves the
 * rest from the OS page cache without a syscall or a copy (validations spread over 100k
 * licenses: 10.7 reads per request with neither, 7.0 with the cache alone, 1.1 with the
 * map). Only the daemon's connection: a command or a backup reads most pages once, and a
 * mapped file would count in its peak RSS.
 */
function useServingCache(db: BetterSqlite3.Database): void {
  db.pragma(`cache_size = -${SERVING_CACHE_KIB}`);
  db.pragma(`mmap_size = ${SERVING_MMAP_BYTES}`);
}

const SERVING_CACHE_KIB = 64 * 1024;
const SERVING_MMAP_BYTES = 2 * 1024 ** 3;

/** What our SQL calls that SQLite lacks: migration 5 derives key ids, and SQLite has no SHA-256. */
export function addSqlFunctions(db: BetterSqlite3.Database): void {
  db.function('license_server_key_id', { deterministic: true }, (publicKey) => keyIdOf(publicKey as Uint8Array));
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
    if (code === 'SQLITE_FULL') {
      throw new LicenseServerError('DATABASE_DISK_FULL', `the file system of the SQLite database has no room for this write (${describeFsError(error)}); nothing was changed`, {
        cause: error,
      });
    }
    if (code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_IOERR') {
      throw new LicenseServerError('DATABASE_UNAVAILABLE', `the SQLite database cannot be written: ${(error as Error).message}`, {
        cause: error,
      });
    }
    throw error;
  }
}
