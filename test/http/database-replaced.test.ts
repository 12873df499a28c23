import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadSqliteDriver } from '../../src/lib/storage/sqlite-driver.js';
import { ok, runCli } from '../support/cli.js';
import { customerIds } from '../support/restore-race.js';
import { api, startServe } from '../support/serve.js';

const TOKEN = 'database-replaced-token-0123456789abcdef';

/**
 * Issue 16, item 1: a daemon whose SQLite file is replaced under it (by something that
 * ignores the daemon lock: an older release's restore, or a hand) stops serving rather
 * than acknowledge writes that go to the deleted file.
 */
describe('a SQLite daemon whose database file is replaced under it', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-replaced-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('answers 503 DATABASE_REPLACED to reads and writes, fails /readyz, logs why once, and writes nothing to the old file', async () => {
    const url = path.join(work, 'data', 'license-server.db');
    const env = { LICENSE_DATABASE_URL: url, LICENSE_ADMIN_TOKEN: TOKEN };
    ok(await runCli(['init'], { env }));
    const serve = await startServe(env);
    try {
      assert.equal((await api(serve.url, 'POST', '/api/customers', { token: TOKEN, body: { name: 'before' } })).status, 201);
      // What a restore that ignores the daemon does: a copy renamed over the path once the
      // old WAL is checkpointed and removed.
      const copy = `${url}.copy`;
      const Driver = loadSqliteDriver();
      const source = new Driver(url);
      source.exec(`VACUUM INTO '${copy}'`);
      source.pragma('wal_checkpoint(TRUNCATE)');
      source.close();
      rmSync(`${url}-wal`, { force: true });
      rmSync(`${url}-shm`, { force: true });
      renameSync(copy, url);
      const write = await api(serve.url, 'POST', '/api/customers', { token: TOKEN, body: { name: 'after' } });
      assert.equal(write.status, 503, write.text);
      assert.equal(write.body.error.code, 'DATABASE_REPLACED');
      const read = await api(serve.url, 'GET', '/api/customers', { token: TOKEN });
      assert.equal(read.status, 503, read.text);
      assert.equal((await api(serve.url, 'GET', '/readyz')).status, 503);
      assert.equal((await api(serve.url, 'GET', '/healthz')).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(serve.stderr().match(/the database file was replaced under the daemon/g)?.length, 1, serve.stderr());
    } finally {
      await serve.stop();
    }
    assert.equal((await customerIds(url)).size, 1, 'the customer from before the copy, nothing after');
  });
});
