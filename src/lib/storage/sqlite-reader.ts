import type { Worker } from 'node:worker_threads';
import { LicenseServerError } from '../errors.js';
import { toSqlite } from './sqlite-bind.js';
import { sqliteDriverPath } from './sqlite-driver.js';
import type { Row, SqlValue } from './types.js';

// Runs in the reader thread. CommonJS or an ES module alike (an eval worker inherits
// --input-type=module from a parent started with it): no top-level require or await.
const WORKER = `
import('node:worker_threads').then(async ({ workerData, parentPort }) => {
  const { createRequire } = await import('node:module');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const Database = createRequire(workerData.module)(workerData.module);
  // Below the main thread in the kernel's eyes (Linux: /proc/thread-self names this thread),
  // so that on a busy machine the thread answering clients gets the CPU first.
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    if (workerData.nice && tid > 0) os.setPriority(tid, workerData.nice);
  } catch {}
  const db = new Database(workerData.file, { readonly: true, fileMustExist: true, timeout: workerData.busyTimeoutMs });
  const statements = new Map();
  const asBuffer = (value) => (value instanceof Uint8Array && !Buffer.isBuffer(value) ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : value);
  parentPort.on('message', ({ id, sql, params }) => {
    try {
      let statement = statements.get(sql);
      if (!statement) {
        statement = db.prepare(sql);
        statements.set(sql, statement);
      }
      // A write (INSERT ... RETURNING through query()) belongs to the main connection.
      if (!statement.readonly) return parentPort.postMessage({ id, ok: false, write: true });
      const bound = params.map(asBuffer);
      let rows = [];
      if (statement.reader) {
        // Row by row rather than all(): a terminate() between two rows takes effect.
        for (const row of statement.iterate(...bound)) rows.push(row);
      } else {
        statement.run(...bound);
      }
      parentPort.postMessage({ id, ok: true, rows });
    } catch (error) {
      parentPort.postMessage({ id, ok: false, code: error && error.code, message: String((error && error.message) || error) });
    }
  });
  parentPort.postMessage({ ready: true });
});
`;

interface Answer {
  readonly id: number;
  readonly ok: boolean;
  readonly rows?: Row[];
  readonly write?: boolean;
  readonly code?: string;
  readonly message?: string;
}

interface Pending {
  readonly sql: string;
  readonly params: readonly unknown[];
  readonly queuedAt: number;
  readonly resolve: (rows: Row[] | undefined) => void;
  readonly reject: (error: unknown) => void;
}

export interface SqliteReaderOptions {
  /** Milliseconds one read may wait and run before it fails with DATABASE_UNAVAILABLE (0: no limit). */
  readonly timeoutMs: number;
  /** SQLite's busy timeout for this connection, as the main one's. */
  readonly busyTimeoutMs: number;
  /** The reader thread's nice value (Linux; 0 leaves it as the main thread's). */
  readonly nice?: number;
}

/**
 * Read-only statements on a worker thread with a read-only connection of its own to the
 * same file: better-sqlite3 runs a statement synchronously on the thread that calls it,
 * and one admin list that scans 100k licenses on the daemon's main thread stops every
 * client validation for as long as it runs (issue 24: 4,257 to 13 req/s). WAL lets this
 * connection read beside the main one's writes; each statement reads the last commit.
 *
 * One statement at a time, in order: admin reads are few, and a second one beside it would
 * take the second core from the clients. A statement that outlives `timeoutMs` fails with
 * 503 and its thread is terminated (it ends at its next row; a sort still running finishes
 * first); a thread that dies fails what it was running with 503. The next read starts a
 * new thread either way.
 *
 * `query` answers `undefined` for a statement that writes: the caller runs it on the main
 * connection.
 */
export class SqliteReader {
  private worker: Worker | undefined;
  private readonly queue: Pending[] = [];
  private running: { readonly id: number; readonly item: Pending; readonly timer?: NodeJS.Timeout } | undefined;
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly file: string,
    private readonly options: SqliteReaderOptions,
  ) {}

  query(sql: string, params: readonly SqlValue[]): Promise<Row[] | undefined> {
    if (this.closed) return Promise.reject(new LicenseServerError('DATABASE_UNAVAILABLE', 'the database is being closed or replaced'));
    return new Promise((resolve, reject) => {
      // Bound as the main connection binds; Buffers cross to the thread as Uint8Arrays and are made Buffers again there.
      this.queue.push({ sql, params: params.map(toSqlite), queuedAt: Date.now(), resolve, reject });
      this.dispatch();
    });
  }

  /** Fails what waits, and stops the thread. Reads after this fail at once. */
  async close(): Promise<void> {
    this.closed = true;
    const error = new LicenseServerError('DATABASE_UNAVAILABLE', 'the database is being closed or replaced');
    for (const item of this.queue.splice(0)) item.reject(error);
    this.fail(error);
    await this.stop();
  }

  private dispatch(): void {
    if (this.running || this.closed) return;
    const item = this.queue.shift();
    if (!item) return;
    const worker = this.ensureWorker();
    const id = this.nextId++;
    const left = this.options.timeoutMs > 0 ? this.options.timeoutMs - (Date.now() - item.queuedAt) : Infinity;
    if (left <= 0) {
      item.reject(this.timedOut());
      return this.dispatch();
    }
    const timer = Number.isFinite(left) ? setTimeout(() => this.expire(id), left) : undefined;
    this.running = { id, item, timer };
    worker.ref();
    worker.postMessage({ id, sql: item.sql, params: item.params });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    // Loaded here, at the first offloaded read (serve only), not by every command that opens
    // a SQLite store: worker_threads costs a command line's start-up about 2 ms.
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    const worker = new Worker(WORKER, {
      eval: true,
      workerData: { module: sqliteDriverPath(), file: this.file, busyTimeoutMs: this.options.busyTimeoutMs, nice: this.options.nice ?? 0 },
    });
    this.worker = worker;
    worker.on('message', (answer: Answer & { ready?: boolean }) => {
      if (answer.ready || this.running?.id !== answer.id) return;
      const { item, timer } = this.running;
      clearTimeout(timer);
      this.running = undefined;
      // Idle, it must not keep a finished process alive.
      if (this.queue.length === 0) worker.unref();
      if (answer.ok) item.resolve(answer.rows!.map(withBuffers));
      else if (answer.write) item.resolve(undefined);
      else item.reject(reviveError(answer));
      this.dispatch();
    });
    const died = (reason: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.fail(new LicenseServerError('DATABASE_UNAVAILABLE', `the SQLite reader thread ${reason}; the request was not answered, try again`));
      this.dispatch();
    };
    worker.on('error', (error) => died(`failed (${error.message.slice(0, 200)})`));
    worker.on('exit', (code) => died(`exited with ${code}`));
    return worker;
  }

  private expire(id: number): void {
    if (this.running?.id !== id) return;
    this.fail(this.timedOut());
    void this.stop();
    this.dispatch();
  }

  private fail(error: unknown): void {
    const running = this.running;
    if (!running) return;
    this.running = undefined;
    clearTimeout(running.timer);
    running.item.reject(error);
  }

  private async stop(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.terminate().catch(() => undefined);
  }

  private timedOut(): LicenseServerError {
    return new LicenseServerError(
      'DATABASE_UNAVAILABLE',
      `an admin read took longer than ${this.options.timeoutMs / 1000} s (database.admin_statement_timeout) and was stopped; ask for a smaller page or a narrower filter`,
    );
  }
}

/** Blobs come back from the main connection as Buffers; structured cloning made them Uint8Arrays. */
function withBuffers(row: Row): Row {
  for (const key in row) {
    const value = row[key];
    if (value instanceof Uint8Array && !Buffer.isBuffer(value)) row[key] = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  }
  return row;
}

function reviveError(answer: Answer): Error {
  const error = new Error(answer.message ?? 'SQLite error') as Error & { code?: string };
  if (answer.code !== undefined) error.code = answer.code;
  return error;
}
