import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
  const { environment, databaseOf, caughtUp, column, restoreByHand } = replicationFixture({ work: () => work, litestream: () => litestream });

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

  it('restores to a moment between two writes: exactly the first is there, with the configuration of the backup nearest the moment; the dry run names the snapshot and the moment and writes nothing to backup.path', async function () {
    this.timeout(120_000);
    const configFile = path.join(work, 'config.yaml');
    writeFileSync(configFile, 'server:\n  metrics_store_refresh: 7\n');
    const backups = path.join(work, 'backups');
    const serve = await startServe(environment({ LICENSE_CONFIG: configFile, LICENSE_BACKUP_PATH: backups }));
    await createCustomer(serve, 'Before the moment');
    const backup = await api(serve.url, 'POST', '/api/backups', { token: serve.token!, body: {} });
    assert.equal(backup.status, 201, backup.text);
    await caughtUp(serve);
    // Litestream's times have second precision: the moment is a whole second after the first
    // write is on the replica, and the second write comes well after it.
    const moment = new Date(Math.ceil((Date.now() + 1000) / 1000) * 1000);
    await new Promise((resolve) => setTimeout(resolve, moment.getTime() - Date.now() + 1500));
    await createCustomer(serve, 'After the moment');
    await caughtUp(serve);
    const databasePath = databaseOf(serve);
    await serve.stop();
    // The host's configuration changed after the moment; the restore brings back the backup's.
    writeFileSync(configFile, 'server:\n  metrics_store_refresh: 9\n');

    const env = { ...environment(), LICENSE_DATABASE_URL: databasePath, LICENSE_BACKUP_PATH: backups, LICENSE_CONFIG: configFile };
    const listed = readdirSync(backups).sort();
    const dryRun = ok(await runCli(['backup', 'restore', '--to-time', moment.toISOString(), '--target', 'offsite', '--dry-run', '--json'], { env, cwd: work })).json();
    assert.equal(dryRun.replica.target, 'offsite');
    assert.equal(dryRun.replica.to_time, moment.toISOString());
    assert.ok(dryRun.replica.state_at <= moment.toISOString() && dryRun.replica.snapshot.created_at <= dryRun.replica.state_at, JSON.stringify(dryRun.replica));
    assert.deepEqual(dryRun.configuration, { from: 'backup', backup_id: backup.body.backup_id ?? backup.body.id, created_at: backup.body.created_at });
    assert.deepEqual(readdirSync(backups).sort(), listed, 'the dry run wrote nothing into backup.path');
    assert.match(readFileSync(configFile, 'utf8'), /metrics_store_refresh: 9/, 'the dry run changed no configuration');
    assert.deepEqual(await column(databasePath, 'SELECT name FROM customers ORDER BY name'), ['After the moment', 'Before the moment'], 'the dry run changed nothing');

    const restored = ok(await runCli(['backup', 'restore', '--to-time', moment.toISOString(), '--target', 'offsite', '--yes'], { env, cwd: work }));
    assert.match(restored.stdout, /replica on offsite at .*: snapshot [0-9a-f]{16}\/\d+ of .*, replayed to the state of .*; the configuration file comes from backup \S+ of \S+, the nearest to that moment; notification settings are the replica's/);
    assert.match(readFileSync(configFile, 'utf8'), /metrics_store_refresh: 7/);
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

  it('restores to a moment over the API while the daemon serves (dry run, confirm, report), and the writes after it are replicated in a new generation', async function () {
    this.timeout(120_000);
    const serve = await startServe(environment({ LICENSE_BACKUP_PATH: path.join(work, 'backups') }));
    await createCustomer(serve, 'Before the moment');
    const first = await caughtUp(serve);
    const moment = new Date(Math.ceil((Date.now() + 1000) / 1000) * 1000);
    await new Promise((resolve) => setTimeout(resolve, moment.getTime() - Date.now() + 1500));
    await createCustomer(serve, 'After the moment');
    await caughtUp(serve);
    const restore = (body: Record<string, unknown>) => api(serve.url, 'POST', '/api/replicas/offsite/restore', { token: serve.token!, body });
    const names = async () => ((await api(serve.url, 'GET', '/api/customers', { token: serve.token! })).body as Array<{ name: string }>).map((customer) => customer.name).sort();

    const preview = await restore({ to_time: moment.toISOString(), dry_run: true });
    assert.equal(preview.status, 200, preview.text);
    assert.equal(preview.body.dry_run, true);
    assert.equal(preview.body.replica.to_time, moment.toISOString());
    assert.deepEqual(preview.body.configuration, { from: 'this host', reason: 'backup.path holds no backup archive' });
    assert.deepEqual(await names(), ['After the moment', 'Before the moment'], 'the dry run changed nothing');
    const unconfirmed = await restore({ to_time: moment.toISOString(), confirm: '2026-01-01T00:00:00Z' });
    assert.equal(unconfirmed.status, 400, unconfirmed.text);
    assert.equal(unconfirmed.body.error.code, 'RESTORE_NOT_CONFIRMED');
    assert.equal((await api(serve.url, 'POST', '/api/replicas/nowhere/restore', { token: serve.token!, body: { to_time: moment.toISOString(), dry_run: true } })).body.error.code, 'TARGET_NOT_CONFIGURED');

    const report = await restore({ to_time: moment.toISOString(), confirm: moment.toISOString() });
    assert.equal(report.status, 200, report.text);
    assert.ok(report.body.pre_restore_backup_id, 'a pre-restore backup was taken');
    assert.ok(report.body.replica.state_at <= moment.toISOString());
    assert.deepEqual(await names(), ['Before the moment']);
    // Litestream #781: the writes after a restore go on being replicated, in a new generation.
    await createCustomer(serve, 'After the restore');
    const after = await caughtUp(serve);
    assert.notEqual(after.local_position.split('/')[0], first.local_position.split('/')[0], 'a new generation');
    const databasePath = databaseOf(serve);
    await serve.stop('SIGKILL');
    rmSync(path.dirname(databasePath), { recursive: true, force: true });
    assert.deepEqual(await column(await restoreByHand(databasePath), 'SELECT name FROM customers ORDER BY name'), ['After the restore', 'Before the moment']);
  });
});
