import assert from 'node:assert/strict';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { usePostgresDatabase } from '../../support/postgres.js';

/**
 * Two transactions that lock two rows in opposite orders: PostgreSQL ends one of them with
 * 40P01 after deadlock_timeout (1 s by default). Seen in the seat races (SEAT_RACE_SEED=543898
 * on PostgreSQL answered validations and deactivations with 500 INTERNAL).
 */
describe('PostgreSQL transactions ended by a deadlock', function () {
  this.timeout(30_000);
  const url = usePostgresDatabase();
  let db: Database;
  before(async () => {
    db = await openDatabase(url());
    await db.execute('CREATE TABLE deadlock_pair (id INTEGER PRIMARY KEY, touched INTEGER NOT NULL)');
    await db.execute('INSERT INTO deadlock_pair (id, touched) VALUES (1, 0), (2, 0)');
  });
  after(async () => {
    await db?.close();
  });

  it('are run again from the start, so that both commit once each', async () => {
    const runs = [0, 0];
    let bothHoldOne!: () => void;
    const holding = new Promise<void>((resolve) => (bothHoldOne = resolve));
    let held = 0;
    const crossing = (first: number, second: number, index: number) =>
      db.transaction(async (tx) => {
        runs[index]! += 1;
        await tx.execute('UPDATE deadlock_pair SET touched = touched + 1 WHERE id = ?', [first]);
        // Only the first attempts meet in the middle; a run again goes straight through.
        if (runs[index] === 1) {
          if (++held === 2) bothHoldOne();
          await holding;
        }
        await tx.execute('UPDATE deadlock_pair SET touched = touched + 1 WHERE id = ?', [second]);
        return index;
      });
    const results = await Promise.allSettled([crossing(1, 2, 0), crossing(2, 1, 1)]);
    assert.deepEqual(results.map((result) => (result.status === 'fulfilled' ? result.value : String(result.reason))), [0, 1]);
    // One of them ran twice: the server did break a deadlock, and the retry is what saved it.
    assert.deepEqual([...runs].sort(), [1, 2]);
    const rows = await db.query<{ id: number; touched: number }>('SELECT id, touched FROM deadlock_pair ORDER BY id');
    assert.deepEqual(rows, [{ id: 1, touched: 2 }, { id: 2, touched: 2 }]);
  });

  it('still fail with what the statement did wrong when that is not a deadlock', async () => {
    let runs = 0;
    await assert.rejects(
      db.transaction(async (tx) => {
        runs += 1;
        await tx.execute('INSERT INTO deadlock_pair (id, touched) VALUES (1, 0)');
      }),
      (error: { code?: string }) => error.code === '23505',
    );
    assert.equal(runs, 1);
  });
});
