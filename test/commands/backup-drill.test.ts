import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { replicationFixture } from '../support/replication.js';
import { scaledMs } from '../support/busy-machine.js';
import { api, killAllServes, startServe, type ServeProcess } from '../support/serve.js';
import { runCli } from '../support/cli.js';
import { findLitestream } from '../../src/lib/replication/litestream-binary.js';

/**
 * Issue 37, Deliver 4: `backup drill` beside a serving, replicating daemon (real serve, real
 * Litestream, a file target), and the daemon's own drills on backup.drill.schedule.
 */
describe('backup drill: the newest backup and the replica restored and checked off the serving path [sqlite]', function () {
  let work: string;
  let litestream: string;
  const { environment, caughtUp } = replicationFixture({ work: () => work, litestream: () => litestream });

  before(async function () {
    litestream = (await findLitestream(undefined)).binary;
  });
  beforeEach(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-drill-'));
  });
  afterEach(() => {
    killAllServes();
    rmSync(work, { recursive: true, force: true });
  });

  const serveEnv = (extra: Record<string, string> = {}) => environment({ LICENSE_DATA_DIR: path.join(work, 'data'), ...extra });
  const metric = async (serve: ServeProcess, name: string): Promise<number | undefined> => {
    const answer = await api(serve.url, 'GET', '/metrics', { token: serve.token! });
    const line = answer.text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  };
  const customers = async (serve: ServeProcess) => (await api(serve.url, 'GET', '/api/customers', { token: serve.token! })).body.map((customer: { name: string }) => customer.name).sort();

  it('passes on a backup and a replica that hold every write, beside the daemon, which serves on untouched; a damaged backup fails it with exit 18', async function () {
    this.timeout(180_000);
    const serve = await startServe(serveEnv({ LICENSE_BACKUP_DRILL_ENABLED: 'false' }));
    for (const name of ['Acme', 'Globex']) assert.equal((await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name } })).status, 201);
    const backup = await api(serve.url, 'POST', '/api/backups', { token: serve.token!, body: {} });
    assert.equal(backup.status, 201, backup.text);
    const backupId: string = backup.body.id ?? backup.body.backup_id;
    assert.equal((await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name: 'Initech' } })).status, 201);
    await caughtUp(serve);
    // A replica must hold the writes older than its newest WAL segment less 2 s (drill.ts): one more, later.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    assert.equal((await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name: 'Umbrella' } })).status, 201);
    await caughtUp(serve);
    assert.equal(await metric(serve, 'license_server_restore_drill_last_ok'), undefined, 'no drill has run yet');

    const drill = await runCli(['backup', 'drill', '--json'], { env: serveEnv(), cwd: work });
    assert.equal(drill.code, 0, drill.stderr);
    const record = JSON.parse(drill.stdout);
    assert.equal(record.ok, true);
    assert.deepEqual(record.parts.map((part: { source: string; name: string }) => `${part.source} ${part.name}`), [`backup ${backupId}`, 'replica offsite']);
    const replica = record.parts[1];
    assert.deepEqual(replica.checks.map((check: { check: string }) => check.check), ['restore', 'database', 'rows', 'signing keys', 'checkout']);
    assert.ok(Number(/customers (\d+)/.exec(replica.checks[2].detail)![1]) >= 3, `the replica was required to hold the customer made after the backup: ${replica.checks[2].detail}`);
    assert.deepEqual(await customers(serve), ['Acme', 'Globex', 'Initech', 'Umbrella'], 'the drill\'s own customer went into scratch copies only');
    assert.equal(await metric(serve, 'license_server_restore_drill_last_ok'), 1);
    const passedAt = await metric(serve, 'license_server_restore_drill_last_success_timestamp_seconds');
    assert.equal(passedAt, Date.parse(record.finished_at) / 1000);

    // Without a terminal: one summary line, for cron.
    const quiet = await runCli(['backup', 'drill'], { env: serveEnv(), cwd: work });
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.match(quiet.stdout, /^restore drill passed: backup \S+, replica offsite\n$/);
    const quietPassedAt = await metric(serve, 'license_server_restore_drill_last_success_timestamp_seconds');
    assert.ok(quietPassedAt! > passedAt!);

    const archive = path.join(work, 'data', 'backups', readdirSync(path.join(work, 'data', 'backups')).find((name) => name.startsWith(`${backupId}.backup.tar`))!);
    const bytes = readFileSync(archive);
    const middle = Math.floor(bytes.length / 2);
    bytes.writeUInt8(bytes.readUInt8(middle) ^ 0xff, middle);
    writeFileSync(archive, bytes);
    const failed = await runCli(['backup', 'drill'], { env: serveEnv(), cwd: work });
    assert.equal(failed.code, 18, failed.stderr);
    assert.match(failed.stdout, /backup \S+: FAILED in [\d.]+ s/);
    assert.match(failed.stderr, /restore drill failed on backup \S+: backup is damaged/);
    assert.match(failed.stderr, /RESTORE_DRILL_FAILED/);
    assert.equal(await metric(serve, 'license_server_restore_drill_last_ok'), 0);
    assert.equal(await metric(serve, 'license_server_restore_drill_last_success_timestamp_seconds'), quietPassedAt, 'the last success stays the one before');
    // Where an operator looks first: backup status, on the command line and through the API.
    const status = await runCli(['backup', 'status'], { env: serveEnv(), cwd: work });
    assert.equal(status.code, 0, status.stderr);
    const drillLine = /^Last restore drill: FAILED at \S+ \(\d+m \d+s ago, manual\): backup (\S+): ([A-Z_]+) backup is damaged/m.exec(status.stdout);
    assert.ok(drillLine, status.stdout);
    assert.match(status.stdout, /^Replication \(Litestream v0\.3\.\d+\): replicating, as of \d+m \d+s ago$/m);
    const viaApi = await api(serve.url, 'GET', '/api/backups/status', { token: serve.token! });
    assert.equal(viaApi.status, 200, viaApi.text);
    assert.equal(viaApi.body.drill.ok, false);
    assert.deepEqual([viaApi.body.drill.parts[0].name, viaApi.body.drill.parts[0].error.code], [drillLine[1], drillLine[2]]);
    assert.equal((await serve.stop()).code, 0);
  });

  it('runs in the daemon on backup.drill.schedule, recorded as scheduled and exported with the schedule\'s interval', async function () {
    this.timeout(120_000);
    const serve = await startServe(serveEnv({ LICENSE_BACKUP_DRILL_SCHEDULE: '*/3 * * * * *' }));
    assert.equal((await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name: 'Acme' } })).status, 201);
    await caughtUp(serve);
    assert.equal(await metric(serve, 'license_server_restore_drill_interval_seconds'), 3);
    const deadline = Date.now() + scaledMs(30_000);
    let history: { drills: Array<{ trigger: string; ok: boolean; parts: Array<{ source: string; ok: boolean }> }> } = { drills: [] };
    while (Date.now() < deadline) {
      try {
        history = JSON.parse(readFileSync(path.join(work, 'data', 'backups', 'drill-history.json'), 'utf8'));
      } catch {
        // Not written yet.
      }
      // The log line comes just after the record.
      if (history.drills.length > 0 && /restore drill (passed|failed)/.test(serve.stdout() + serve.stderr())) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const [drill] = history.drills;
    assert.ok(drill, `no scheduled drill within the limit; serve's log:\n${serve.stderr()}`);
    assert.equal(drill.trigger, 'scheduled');
    assert.equal(drill.ok, true, JSON.stringify(drill));
    assert.deepEqual(drill.parts.map((part) => part.source), ['replica'], 'no backup yet and backup.enabled off: the replica alone');
    assert.match(serve.stdout() + serve.stderr(), /restore drill passed/);
    assert.equal(await metric(serve, 'license_server_restore_drill_last_ok'), 1);
    assert.equal((await serve.stop()).code, 0);
  });
});
