import assert from 'node:assert/strict';
import { deadlineBatchQuery } from '../../../src/lib/notifications/license-clock.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';
import { explain, fillStore, planProblems } from '../../support/query-plans.js';

/**
 * The license clock's scan at a million licenses reads only those in its windows: each
 * batch's plan walks licenses_valid_until (migration 8), and never reads the table whole
 * nor sorts it, on the first batch and after a cursor alike.
 */
forEachEngine('the license clock reads licenses by valid_until', (fixture) => {
  let db: Database;
  before(async function () {
    this.timeout(120_000);
    db = await fixture.freshDatabase();
    await fillStore(db);
    if (db.engine === 'postgres') await db.execute('ANALYZE');
  });

  it('plans every batch on the index licenses_valid_until', async () => {
    const upper = '2025-03-01T00:00:00.000Z';
    for (const start of [{ after: '2025-01-01T00:00:00.000Z' }, { validUntil: '2025-02-01T00:00:00.000Z', id: '00000000-0000-4000-8000-000000000000' }]) {
      const query = deadlineBatchQuery(upper, start, 500);
      const plan = await explain(db, query.sql, query.params);
      assert.deepEqual(planProblems(fixture.engine, plan), [], plan.join(' | '));
      assert.match(plan.join(' | '), /licenses_valid_until/, plan.join(' | '));
    }
  });
});
