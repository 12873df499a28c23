import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { SqliteDatabase } from '../../../src/lib/storage/sqlite.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { scaledMs } from '../../support/busy-machine.js';

/**
 * Admin reads on the reader thread (storage/sqlite-reader.ts) answer exactly what the main
 * connection answers, leave writes to it, and fail with 503 rather than hang when a read
 * runs too long or its thread dies.
 */
describe('SQLite reads on a reader thread', () => {
  let dir: string;
  let db: SqliteDatabase;
  let reads: Database;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-reader-'));
    db = SqliteDatabase.open(path.join(dir, 'store.db'));
    await db.execute('CREATE TABLE t (id INTEGER PRIMARY KEY, label TEXT, amount REAL, blob BLOB, flag INTEGER, absent TEXT)');
    await db.execute('INSERT INTO t (label, amount, blob, flag) VALUES (?, ?, ?, ?), (?, ?, ?, ?)', [
      'tab\there ünïcødé 🎉', 2.5, Buffer.from([0, 1, 254, 255]), true,
      'big', 9007199254740991, new Uint8Array([7]), false,
    ]);
    // A first read starts the thread: on a loaded machine that alone can take longer than 0.3 s.
    reads = db.withOffloadedReads({ timeoutMs: scaledMs(1000) });
  });
  afterEach(async () => {
    await reads?.close();
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const isUnavailable = (error: unknown) => error instanceof LicenseServerError && error.code === 'DATABASE_UNAVAILABLE';
  // Counts to 10^8 in SQL, seconds of work, answering a row every 10^5: a stopped thread
  // ends at its next row (an aggregate would run to its end first).
  const SLOW = 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 100000000) SELECT n FROM c WHERE n % 100000 = 0';

  it('answers the rows the main connection answers, blobs as Buffers', async () => {
    const sql = 'SELECT * FROM t WHERE id >= ? ORDER BY id';
    const main = await db.query(sql, [1]);
    const offloaded = await reads.query(sql, [1]);
    assert.deepEqual(offloaded, main);
    assert.ok(Buffer.isBuffer(offloaded[0]!.blob) && Buffer.isBuffer(offloaded[1]!.blob));
    // Booleans, Dates and bytes bind as on the main connection.
    assert.deepEqual(await reads.query('SELECT id FROM t WHERE flag = ? AND blob = ?', [true, new Uint8Array([0, 1, 254, 255])]), [{ id: 1 }]);
    assert.deepEqual(await reads.query('SELECT ? AS at', [new Date(Date.UTC(2026, 0, 2))]), [{ at: '2026-01-02T00:00:00.000Z' }]);
  });

  it('sees every commit of the main connection, and leaves writes to it', async () => {
    await db.transaction((tx) => tx.execute("INSERT INTO t (label) VALUES ('later')"));
    assert.equal((await reads.query<{ n: number }>('SELECT count(*) AS n FROM t'))[0]!.n, 3);
    // A write through query() (RETURNING) runs on the main connection.
    const [row] = await reads.query<{ id: number }>("INSERT INTO t (label) VALUES ('returned') RETURNING id");
    assert.equal(row!.id, 4);
    assert.equal(await reads.execute("UPDATE t SET label = 'x' WHERE id = 4"), 1);
    assert.equal((await db.query<{ label: string }>('SELECT label FROM t WHERE id = 4'))[0]!.label, 'x');
  });

  it('stops a read that runs past its timeout with 503, and reads on afterwards', async () => {
    // The thread started first: on a loaded machine its start alone outlasted the timeout
    // (CI, Node 22: the queued count below was the one stopped).
    for (let attempt = 1; ; attempt++) {
      try {
        await reads.query('SELECT 1');
        break;
      } catch (error) {
        if (attempt === 3 || !isUnavailable(error)) throw error;
      }
    }
    const started = Date.now();
    const queued = reads.query('SELECT count(*) AS n FROM t');
    await assert.rejects(reads.query(SLOW), (error) => isUnavailable(error) && /admin_statement_timeout/.test((error as Error).message));
    assert.ok(Date.now() - started < scaledMs(4000), `took ${Date.now() - started} ms`);
    assert.deepEqual(await queued, [{ n: 2 }]);
    assert.deepEqual(await reads.query('SELECT count(*) AS n FROM t'), [{ n: 2 }]);
  });

  it('answers 503 when its thread dies under a read, and starts another', async () => {
    const running = reads.query(SLOW);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // What a crash of the thread looks like from the daemon's side.
    const worker = (reads as unknown as { reader: { worker: { terminate(): Promise<number> } } }).reader.worker;
    void worker.terminate();
    await assert.rejects(running, (error) => isUnavailable(error) && /reader thread/.test((error as Error).message));
    assert.deepEqual(await reads.query('SELECT count(*) AS n FROM t'), [{ n: 2 }]);
  });

  it('fails at once once closed, the main connection still open', async () => {
    await reads.close();
    await assert.rejects(reads.query('SELECT 1'), isUnavailable);
    assert.deepEqual(await db.query('SELECT count(*) AS n FROM t'), [{ n: 2 }]);
  });

  it('refuses a file replaced under it', async () => {
    const other = SqliteDatabase.open(path.join(dir, 'other.db'));
    await other.execute('CREATE TABLE t (id INTEGER)');
    await other.close();
    renameSync(path.join(dir, 'other.db'), path.join(dir, 'store.db'));
    await assert.rejects(reads.query('SELECT count(*) AS n FROM t'), (error) => error instanceof LicenseServerError && error.code === 'DATABASE_REPLACED');
  });
});
