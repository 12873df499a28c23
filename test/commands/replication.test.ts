import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { scaledMs } from '../support/busy-machine.js';
import { killAllServes, startServe, api, type ServeProcess } from '../support/serve.js';
import { ok, runCli } from '../support/cli.js';
import { startReceiver } from '../support/receiver.js';
import { replicationFixture } from '../support/replication.js';
import { findLitestream } from '../../src/lib/replication/litestream-binary.js';

/**
 * Issue 37: serve replicates its SQLite database with Litestream to a file target. Each test
 * reads the replica back the way docs/replication.md tells an operator without this tool
 * (test/support/replication.ts).
 */
describe('continuous replication by Litestream (serve, backup.replication) [sqlite]', function () {
  let work: string;
  let litestream: string;

  before(async function () {
    litestream = (await findLitestream(undefined)).binary;
  });
  beforeEach(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-replication-'));
  });
  let closeAfter: { close(): Promise<void> } | undefined;
  afterEach(async () => {
    await closeAfter?.close();
    closeAfter = undefined;
    killAllServes();
    rmSync(work, { recursive: true, force: true });
  });

  const { targetDir, environment, databaseOf, status, caughtUp, gone, restoreByHand: restoreFile, column } = replicationFixture({ work: () => work, litestream: () => litestream });
  const restoreByHand = async (databasePath: string): Promise<string[]> => column(await restoreFile(databasePath), 'SELECT name FROM customers ORDER BY name');
  const createCustomer = async (serve: ServeProcess, name: string) => {
    const answer = await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name } });
    assert.equal(answer.status, 201, answer.text);
    return answer.body.id as string;
  };

  it('replicates each acknowledged write, encrypted, with no secret in its configuration; a SIGKILL of serve ends Litestream, and the hand restore of the docs gives the writes back', async function () {
    this.timeout(90_000);
    const serve = await startServe(environment());
    const names = ['Ada', 'Bea', 'Cyd', 'Dot', 'Eve'];
    for (const name of names) await createCustomer(serve, name);
    const replicating = await caughtUp(serve);
    assert.equal(replicating.replicas[0].target, 'offsite');
    assert.match(replicating.litestream_version, /^v0\.3\./);
    const databasePath = databaseOf(serve);

    const configFile = `${databasePath}.litestream.yml`;
    assert.equal(statSync(configFile).mode & 0o777, 0o600);
    const config = readFileSync(configFile, 'utf8');
    assert.doesNotMatch(config, /AGE-SECRET-KEY/);
    assert.match(config, /identities: \['\$\{LICENSE_REPLICA_AGE_IDENTITY\}'\]/);
    // The daemon's environment is not Litestream's: its backup key is not there.
    const litestreamEnvironment = readFileSync(`/proc/${replicating.pid}/environ`, 'utf8').split('\0');
    assert.ok(!litestreamEnvironment.some((entry) => entry.startsWith('LICENSE_BACKUP_ENCRYPTION_KEY=')), 'Litestream got the backup key');
    assert.ok(litestreamEnvironment.some((entry) => entry.startsWith('LICENSE_REPLICA_AGE_IDENTITY=AGE-SECRET-KEY-1')));

    const generations = path.join(targetDir(), 'replica', 'generations');
    const [generation] = readdirSync(generations);
    const snapshot = readdirSync(path.join(generations, generation!, 'snapshots'))[0]!;
    assert.equal(readFileSync(path.join(generations, generation!, 'snapshots', snapshot)).subarray(0, 22).toString('latin1'), 'age-encryption.org/v1\n');

    await serve.stop('SIGKILL');
    await gone(replicating.pid, 'Litestream, after serve was killed');
    rmSync(path.dirname(databasePath), { recursive: true, force: true });
    assert.deepEqual(await restoreByHand(databasePath), names);
  });

  it('notices a SIGKILL of Litestream alone, starts it again, and the replica catches up with the writes made meanwhile', async function () {
    this.timeout(90_000);
    const serve = await startServe(environment());
    await createCustomer(serve, 'Before');
    const first = await caughtUp(serve);
    process.kill(first.pid, 'SIGKILL');
    await gone(first.pid, 'the killed Litestream');
    await createCustomer(serve, 'While down');
    const deadline = Date.now() + scaledMs(20_000);
    let again: any = await status(serve);
    while (!(again.restarts === 1 && again.pid !== null && again.pid !== first.pid && again.state === 'replicating')) {
      if (Date.now() > deadline) assert.fail(`Litestream was not started again: ${JSON.stringify(again)}\n${serve.stdout()}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      again = await status(serve);
    }
    assert.match(serve.stdout() + serve.stderr(), /"msg":"litestream exited; restarting"/);
    await createCustomer(serve, 'After');
    await caughtUp(serve);
    const metrics = await api(serve.url, 'GET', '/metrics', { token: serve.token! });
    assert.match(metrics.text, /^license_server_replication_restarts_total 1$/m);
    assert.match(metrics.text, /^license_server_replication_lag_seconds\{target="offsite"\} 0$/m);
    assert.match(metrics.text, /^license_server_replication_up 1$/m);
    const databasePath = databaseOf(serve);
    await serve.stop('SIGKILL');
    await gone(again.pid, 'Litestream, after serve was killed');
    assert.deepEqual(await restoreByHand(databasePath), ['After', 'Before', 'While down']);
  });

  it('a target that is down: the lag grows, errors count, backup.replication_stalled is raised once; when it is back, the replica catches up with no gap', async function () {
    // The 5 minutes: REPLICATION_TARGET_DOWN_SECONDS=300 (the suite's 75 s passes the stall threshold).
    const downSeconds = Number(process.env.REPLICATION_TARGET_DOWN_SECONDS ?? 75);
    this.timeout((downSeconds + 165) * 1000);
    const serve = await startServe(environment());
    const receiver = await startReceiver();
    closeAfter = receiver;
    writeFileSync(path.join(work, 'n.json'), JSON.stringify({ webhooks: [{ name: 'ops', url: receiver.url, secret: 'replication-stalled-secret-0123' }], rules: [{ event: 'backup.replication_stalled', webhook: 'ops' }] }));
    ok(await runCli(['notifications', 'set', '--file', path.join(work, 'n.json')], { env: { LICENSE_DATABASE_URL: databaseOf(serve) }, cwd: work }));
    await createCustomer(serve, 'Before');
    await caughtUp(serve);
    // Down: where the replica's directory was, a file (root ignores permissions, not this).
    const replica = path.join(targetDir(), 'replica');
    renameSync(replica, `${replica}.away`);
    writeFileSync(replica, 'not a directory');
    await createCustomer(serve, 'While the target is down');
    const downUntil = Date.now() + downSeconds * 1000;
    let behind: any;
    while (Date.now() < downUntil) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      behind = (await status(serve)).replicas[0];
    }
    assert.ok(behind.lag_seconds >= downSeconds - 5, `lag ${behind.lag_seconds} s after ${downSeconds} s down`);
    assert.ok(behind.errors > 0 && behind.last_error !== null, JSON.stringify(behind));
    // The command line runs without the daemon: it reads what serve records beside the database.
    const databasePath = databaseOf(serve);
    const cliEnv = environment({ LICENSE_DATA_DIR: path.dirname(databasePath), LICENSE_DATABASE_URL: databasePath });
    const replicaRow = (stdout: string) => /^offsite\s+([\d.]+)s\s+\S+\s+(\d+)\s+\S+/m.exec(stdout.split('\nReplication (')[1] ?? '');
    const whileDown = ok(await runCli(['backup', 'status'], { env: cliEnv, cwd: work })).stdout;
    assert.match(whileDown, /^Replication \(Litestream v0\.3\.\d+\): replicating, as of \d+m \d+s ago(, Litestream restarted .*)?$/m);
    const row = replicaRow(whileDown);
    assert.ok(row && Number(row[1]) >= downSeconds - 10 && Number(row[2]) > 0, `the CLI's replica row while the target is down:\n${whileDown}`);
    const log = serve.stdout() + serve.stderr();
    if (downSeconds >= 60) {
      assert.equal(log.match(/"msg":"replication stalled"/g)?.length, 1, 'one stalled warning');
      const deadline = Date.now() + scaledMs(20_000);
      while (receiver.received.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
      const events = receiver.received.map((request) => JSON.parse(request.body));
      assert.deepEqual(events.map((event) => event.event), ['backup.replication_stalled'], 'one event');
      assert.equal(events[0].data.target, 'offsite');
      assert.ok(events[0].data.lag_seconds >= 60 && typeof events[0].data.last_error === 'string', JSON.stringify(events[0].data));
    }
    rmSync(replica);
    renameSync(`${replica}.away`, replica);
    await createCustomer(serve, 'After the target is back');
    const back = await caughtUp(serve);
    await serve.stop('SIGKILL');
    await gone(back.pid, 'Litestream, after serve was killed');
    const afterKill = ok(await runCli(['backup', 'status'], { env: cliEnv, cwd: work })).stdout;
    assert.match(afterKill, /^Replication \(Litestream v0\.3\.\d+\): serve is not running, as of \d+m \d+s ago(, Litestream restarted .*)?$/m);
    assert.equal(replicaRow(afterKill)?.[1], '0', `the last lag serve recorded, caught up:\n${afterKill}`);
    assert.deepEqual(await restoreByHand(databasePath), ['After the target is back', 'Before', 'While the target is down']);
  });

  it('after a restore through the API, writes go on being replicated, in a new generation (Litestream #781)', async function () {
    this.timeout(120_000);
    const serve = await startServe(environment());
    await createCustomer(serve, 'In the backup');
    const backup = await api(serve.url, 'POST', '/api/backups', { token: serve.token!, body: {} });
    assert.equal(backup.status, 201, backup.text);
    await createCustomer(serve, 'Undone by the restore');
    const before = await caughtUp(serve);
    const restored = await api(serve.url, 'POST', `/api/backups/${backup.body.id}/restore`, { token: serve.token!, body: { confirm: backup.body.id } });
    assert.equal(restored.status, 200, restored.text);
    await createCustomer(serve, 'After the restore');
    const after = await caughtUp(serve);
    assert.notEqual(after.local_position.split('/')[0], before.local_position.split('/')[0], 'a new generation');
    assert.notEqual(after.pid, before.pid);
    const databasePath = databaseOf(serve);
    await serve.stop('SIGKILL');
    await gone(after.pid, 'Litestream, after serve was killed');
    assert.deepEqual(await restoreByHand(databasePath), ['After the restore', 'In the backup']);
  });

  it('retiring a signing key through the API erases its bytes from the database files: Litestream is paused for the checkpoint, and replication goes on in a new generation', async function () {
    this.timeout(90_000);
    const serve = await startServe(environment());
    await createCustomer(serve, 'Before');
    const first = await caughtUp(serve);
    const rotated = await api(serve.url, 'POST', '/api/signing-keys/rotate', { token: serve.token!, body: {} });
    assert.equal(rotated.status, 200, rotated.text);
    const retired = await api(serve.url, 'POST', `/api/signing-keys/${rotated.body.previous.key_id}/retire`, { token: serve.token!, body: { force: true } });
    assert.equal(retired.status, 200, retired.text);
    // Before: "a reader of the SQLite database kept the checkpoint from finishing": Litestream's read lock.
    assert.equal(retired.body.erase_warning, null);
    await createCustomer(serve, 'After');
    const after = await caughtUp(serve);
    assert.notEqual(after.local_position.split('/')[0], first.local_position.split('/')[0], 'a new generation');
    const databasePath = databaseOf(serve);
    await serve.stop('SIGKILL');
    await gone(after.pid, 'Litestream, after serve was killed');
    rmSync(path.dirname(databasePath), { recursive: true, force: true });
    assert.deepEqual(await restoreByHand(databasePath), ['After', 'Before']);
  });
});
