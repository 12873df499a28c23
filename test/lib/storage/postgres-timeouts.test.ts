import assert from 'node:assert/strict';
import type { LicenseServerError } from '../../../src/lib/errors.js';
import { processApplicationName } from '../../../src/lib/backup/locks/daemon-lock-postgres.js';
import { specFor } from '../../../src/lib/config/schema.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import { DEFAULT_POSTGRES_TIMEOUTS, type PostgresTimeouts } from '../../../src/lib/storage/postgres-connection.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { usePostgresDatabase } from '../../support/postgres.js';

async function unavailable(work: Promise<unknown>): Promise<LicenseServerError> {
  try {
    await work;
  } catch (error) {
    assert.equal((error as LicenseServerError).code, 'DATABASE_UNAVAILABLE', String(error));
    return error as LicenseServerError;
  }
  assert.fail('expected DATABASE_UNAVAILABLE, but the statement was answered');
}

/** Issue 23, item 0b: the timeouts of database.*_timeout, on the real PostgreSQL. */
describe('PostgreSQL timeouts (database.statement_timeout, database.query_timeout)', function () {
  this.timeout(30_000);
  const url = usePostgresDatabase();
  const opened: Database[] = [];
  after(async () => {
    for (const db of opened) await db.close();
  });
  async function open(timeouts: Partial<PostgresTimeouts>): Promise<Database> {
    const db = await openDatabase(url(), { timeouts: { ...DEFAULT_POSTGRES_TIMEOUTS, ...timeouts } });
    opened.push(db);
    return db;
  }

  it('a statement that outlasts the statement timeout is cancelled by the server: DATABASE_UNAVAILABLE, and the pool goes on', async () => {
    const db = await open({ statementTimeout: 1 });
    const error = await unavailable(db.query('SELECT pg_sleep(3)'));
    assert.match(error.message, /database\.statement_timeout is 1 s/);
    await unavailable(db.transaction((tx) => tx.query('SELECT pg_sleep(3)')));
    assert.deepEqual(await db.query('SELECT 1 AS one'), [{ one: 1 }]);
  });

  it('a statement not answered within the query timeout gives its connection up: DATABASE_UNAVAILABLE, and the pool goes on', async () => {
    // No statement timeout: only our own wait can end it.
    const db = await open({ statementTimeout: 0, queryTimeout: 1 });
    const error = await unavailable(db.query('SELECT pg_sleep(3)'));
    assert.match(error.message, /no answer within 1 s \(database\.query_timeout\)/);
    await unavailable(db.transaction(async (tx) => {
      await tx.execute('CREATE TABLE IF NOT EXISTS timeout_probe (n integer)');
      await tx.execute('INSERT INTO timeout_probe VALUES (1)');
      await tx.query('SELECT pg_sleep(3)');
    }));
    assert.deepEqual(await db.query('SELECT 1 AS one'), [{ one: 1 }]);
    // The transaction that timed out was rolled back with its connection.
    assert.deepEqual(await db.query("SELECT to_regclass('timeout_probe') IS NULL AS gone"), [{ gone: true }]);
  });

  it('a transaction for long work (a migration) runs without either timeout', async () => {
    const db = await open({ statementTimeout: 1, queryTimeout: 1 });
    const rows = await db.transaction((tx) => tx.query<{ slept: string }>("SELECT pg_sleep(2)::text AS slept"), { unbounded: true });
    assert.deepEqual(rows, [{ slept: '' }]);
  });

  it('has the defaults of the settings, and names a lock holder within the 63 bytes PostgreSQL keeps', () => {
    assert.deepEqual(DEFAULT_POSTGRES_TIMEOUTS, {
      connectTimeout: specFor('database.connect_timeout')!.default!(''),
      statementTimeout: specFor('database.statement_timeout')!.default!(''),
      queryTimeout: specFor('database.query_timeout')!.default!(''),
    });
    assert.equal(processApplicationName('license-server serve', 4242, 'app1'), 'license-server serve (pid 4242 on app1)');
    const long = processApplicationName('license-server serve', 4194304, 'a-very-long-host-name.eu-west-1.compute.internal');
    assert.equal(long, 'license-server serve (pid 4194304 on a-very-long-host-name.e..)');
    assert.equal(long.length, 63);
  });
});
