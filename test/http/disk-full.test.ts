import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ERROR_TABLE } from '../../src/lib/errors.js';
import { runCli } from '../support/cli.js';
import { ADMIN_URL, onDatabase, requirePostgres } from '../support/postgres.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';
import { fillToTheBrim, smallFileSystems } from '../support/small-fs.js';
import { eventuallyTrue } from '../support/usage-load.js';

const TOKEN = 'disk-full-admin-token-0123456789abcdef';
const FULL = '503 DATABASE_DISK_FULL';

/**
 * Issue 35, item 8: a store whose disk fills up, for real (a tmpfs holding the SQLite
 * database; a PostgreSQL tablespace on a tmpfs that the database lives in). Every write
 * answers 503 DATABASE_DISK_FULL (PostgreSQL answered 500 INTERNAL, SQLite 503
 * DATABASE_UNAVAILABLE), reads go on, `/readyz` says not ready from the first refused write
 * until there is room again, and then the daemon is ready and takes writes by itself.
 */
describe('a daemon whose store runs out of disk space', function () {
  this.timeout(180_000);
  const fs = smallFileSystems();
  const serves: ServeProcess[] = [];
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-disk-full-'));
    // The PostgreSQL server (another OS user) must reach its tablespace below.
    chmodSync(work, 0o755);
  });
  afterEach(async () => {
    for (const serve of serves.splice(0)) await serve.stop();
    fs.unmountAll();
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const outcome = (answer: { status: number; body: any }) => (answer.body?.error ? `${answer.status} ${answer.body.error.code}` : String(answer.status));
  const readiness = async (serve: ServeProcess) => outcome(await api(serve.url, 'GET', '/readyz'));
  const createCustomer = async (serve: ServeProcess, name: string) => outcome(await api(serve.url, 'POST', '/api/customers', { token: TOKEN, body: { name } }));

  /** What both engines must do once `fill` leaves the store's file system without a free block. */
  async function refusesWritesUntilThereIsRoom(serve: ServeProcess, env: Record<string, string>, fill: () => () => void): Promise<void> {
    assert.equal(await readiness(serve), '200');
    assert.equal(await createCustomer(serve, 'Before'), '201');
    const giveRoomBack = fill();
    // No write has failed yet: a ready daemon is never made to write for its readiness.
    assert.equal(await readiness(serve), '200');
    // Pages that still have room take a few rows; then every write is refused.
    const answers: string[] = [];
    // Rows of one size: a smaller one could still fit where this one did not.
    const row = (n: number) => `Filling ${String(n).padStart(6, '0')} ${'x'.repeat(180)}`;
    while (answers.length < 5000 && !answers.some((answer) => answer !== '201')) answers.push(await createCustomer(serve, row(answers.length)));
    const kinds = [...new Set(answers)].sort();
    assert.deepEqual(kinds, kinds.includes('201') ? ['201', FULL] : [FULL], `${answers.length} writes on a full disk`);
    for (let i = 0; i < 3; i += 1) assert.equal(await createCustomer(serve, row(answers.length + i)), FULL);
    // Not ready, also once the probe (at most one a second) has looked again.
    assert.equal(await readiness(serve), FULL);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    assert.equal(await readiness(serve), FULL);
    // Reads go on.
    assert.equal(outcome(await api(serve.url, 'GET', '/api/customers?limit=1', { token: TOKEN })), '200');
    // The command line says the same, with its exit code.
    const cli = await runCli(['customer', 'create', '--name', row(answers.length + 3)], { env });
    assert.equal(cli.code, ERROR_TABLE.DATABASE_DISK_FULL.exit, cli.stderr);
    assert.match(cli.stderr, /\(DATABASE_DISK_FULL\)/);
    assert.doesNotMatch(cli.stderr, /INTERNAL|^\s+at /m);

    giveRoomBack();
    await eventuallyTrue(async () => (await readiness(serve)) === '200', 20_000, 'ready again once there is room');
    assert.equal(await createCustomer(serve, 'After'), '201');
    assert.equal(serve.child.exitCode, null);
  }

  it('SQLite: every write is 503 DATABASE_DISK_FULL and /readyz not ready while the file system is full, ready again with room', async function () {
    const data = fs.mount(this, path.join(work, 'sqlite-data'), 16 * 1024);
    const env = { LICENSE_DATA_DIR: data };
    const serve = await startServe({ ...env, LICENSE_ADMIN_TOKEN: TOKEN });
    serves.push(serve);
    await refusesWritesUntilThereIsRoom(serve, env, () => fillToTheBrim(data));
  });

  it('PostgreSQL: every write is 503 DATABASE_DISK_FULL (not 500) and /readyz not ready while the tablespace is full, ready again with room', async function () {
    await requirePostgres(this);
    const owner = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
    const group = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
    // A new database copies template1 (about 8 MB) into its tablespace.
    const space = fs.mount(this, path.join(work, 'pg-tablespace'), 32 * 1024, `mode=0700,uid=${owner},gid=${group}`);
    const name = `license_test_disk_full_${process.pid}`;
    await onDatabase(ADMIN_URL, async (client) => {
      await client.query(`CREATE TABLESPACE ${name} LOCATION '${space}'`);
      // Everything of the database on it, its temporary tables too: a server whose disk filled.
      await client.query(`CREATE DATABASE ${name} TABLESPACE ${name}`);
    });
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    const env = { LICENSE_DATABASE_URL: url.toString() };
    try {
      const serve = await startServe({ ...env, LICENSE_ADMIN_TOKEN: TOKEN });
      serves.push(serve);
      await refusesWritesUntilThereIsRoom(serve, env, () => fillToTheBrim(space));
      await serve.stop();
    } finally {
      await onDatabase(ADMIN_URL, async (client) => {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await client.query(`DROP TABLESPACE IF EXISTS ${name}`);
      });
    }
  });
});
