import assert from 'node:assert/strict';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { LicenseServerError } from '../../../src/lib/errors.js';
import { usePostgresDatabase } from '../../support/postgres.js';

/**
 * Issue 35, item 8: the PostgreSQL server short of a resource (SQLSTATE class 53) is one of
 * our documented codes, never INTERNAL. A full disk (53100) is test/http/disk-full.test.ts;
 * here a limit of the server's configuration (53400), reached for real.
 */
describe('PostgreSQL short of a resource', function () {
  this.timeout(30_000);
  const url = usePostgresDatabase();

  it('a statement over a configured limit (53400, temp_file_limit) is DATABASE_UNAVAILABLE naming the limit, and the pool goes on', async () => {
    const limited = new URL(url());
    // A sort larger than work_mem spills to a temporary file, which temp_file_limit caps.
    limited.searchParams.set('options', '-c work_mem=64kB -c temp_file_limit=64kB');
    const db = await openDatabase(limited.toString());
    try {
      const error = await db.query('SELECT g FROM generate_series(1, 200000) AS g ORDER BY g DESC').then(
        () => assert.fail('the sort went through'),
        (caught: unknown) => caught as LicenseServerError,
      );
      assert.equal(error.code, 'DATABASE_UNAVAILABLE', String(error));
      assert.match(error.message, /a limit of the server's configuration was reached \(53400: temporary file size exceeds temp_file_limit/);
      assert.deepEqual(await db.query('SELECT 1 AS one'), [{ one: 1 }]);
    } finally {
      await db.close();
    }
  });
});
