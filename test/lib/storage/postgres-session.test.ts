import assert from 'node:assert/strict';
import { openDatabase } from '../../../src/lib/storage/open.js';
import { usePostgresDatabase } from '../../support/postgres.js';

describe('the settings of our PostgreSQL sessions', () => {
  const url = usePostgresDatabase();

  it('have JIT off: a LIMIT over a long index walk would be compiled for longer than it runs', async () => {
    const db = await openDatabase(url());
    try {
      // Both connections of the pool, not just the first one.
      const answers = await Promise.all([db.query<{ jit: string }>('SHOW jit'), db.transaction((tx) => tx.query<{ jit: string }>('SHOW jit'))]);
      assert.deepEqual(answers.map((rows) => rows[0]?.jit), ['off', 'off']);
    } finally {
      await db.close();
    }
  });
});
