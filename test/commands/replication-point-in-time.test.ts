import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { replicationFixture } from '../support/replication.js';
import { api, killAllServes, startServe, type ServeProcess } from '../support/serve.js';
import { ok, runCli } from '../support/cli.js';
import { findLitestream } from '../../src/lib/replication/litestream-binary.js';

/**
 * Issue 37, Deliver 3: `backup restore --to-time T --target NAME` restores the replica as it
 * was at T, through the same restore as an archive's.
 */
describe('backup restore --to-time: a replica at a point in time [sqlite]', function () {
  let work: string;
  let litestream: string;
  const { environment, databaseOf, caughtUp, column } = replicationFixture({ work: () => work, litestream: () => litestream });

  before(async function () {
    litestream = (await findLitestream(undefined)).binary;
  });
  beforeEach(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-point-in-time-'));
  });
  afterEach(() => {
    killAllServes();
    rmSync(work, { recursive: true, force: true });
  });

  const createCustomer = async (serve: ServeProcess, name: string) => {
    const answer = await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name } });
    assert.equal(answer.status, 201, answer.text);
  };

  it('restores to a moment between two writes: exactly the first is there; the dry run names the snapshot and the moment and writes nothing to backup.path', async function () {
    this.timeout(120_000);
    const serve = await startServe(environment());
    await createCustomer(serve, 'Before the moment');
    await caughtUp(serve);
    // Litestream's times have second precision: the moment is a whole second after the first
    // write is on the replica, and the second write comes well after it.
    const moment = new Date(Math.ceil((Date.now() + 1000) / 1000) * 1000);
    await new Promise((resolve) => setTimeout(resolve, moment.getTime() - Date.now() + 1500));
    await createCustomer(serve, 'After the moment');
    await caughtUp(serve);
    const databasePath = databaseOf(serve);
    await serve.stop();

    const env = { ...environment(), LICENSE_DATABASE_URL: databasePath, LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    const dryRun = ok(await runCli(['backup', 'restore', '--to-time', moment.toISOString(), '--target', 'offsite', '--dry-run', '--json'], { env, cwd: work })).json();
    assert.equal(dryRun.replica.target, 'offsite');
    assert.equal(dryRun.replica.to_time, moment.toISOString());
    assert.ok(dryRun.replica.state_at <= moment.toISOString() && dryRun.replica.snapshot.created_at <= dryRun.replica.state_at, JSON.stringify(dryRun.replica));
    assert.ok(!existsSync(path.join(work, 'backups')) || readdirSync(path.join(work, 'backups')).length === 0, 'the dry run wrote nothing into backup.path');
    assert.deepEqual(await column(databasePath, 'SELECT name FROM customers ORDER BY name'), ['After the moment', 'Before the moment'], 'the dry run changed nothing');

    const restored = ok(await runCli(['backup', 'restore', '--to-time', moment.toISOString(), '--target', 'offsite', '--yes'], { env, cwd: work }));
    assert.match(restored.stdout, /replica on offsite at .*: snapshot [0-9a-f]{16}\/\d+ of .*, replayed to the state of /);
    assert.deepEqual(await column(databasePath, 'SELECT name FROM customers ORDER BY name'), ['Before the moment']);
    assert.deepEqual(await column(databasePath, 'PRAGMA integrity_check'), ['ok']);

    // Before the replica's first snapshot: nothing to restore, said with the moments there are.
    const early = await runCli(['backup', 'restore', '--to-time', '2001-01-01T00:00:00Z', '--target', 'offsite', '--yes'], { env, cwd: work });
    assert.equal(early.code, 4, early.stderr);
    assert.match(early.stderr, /holds nothing as early as 2001-01-01T00:00:00.000Z: it can restore to .* through .*\(REPLICA_MOMENT_UNAVAILABLE\)/);
    const usage = await runCli(['backup', 'restore', '--to-time', moment.toISOString()], { env, cwd: work });
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--to-time needs --target/);
  });
});
