import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { scaledMs } from '../support/busy-machine.js';
import { ok, runCli } from '../support/cli.js';
import { loadUntil, type Acknowledged } from '../support/host-loss-load.js';
import { faultSeed } from '../support/kill-moments.js';
import { pgbackrestMissing, startArchivingPostgres, type ArchivingPostgres } from '../support/pgbackrest.js';
import { prng } from '../support/prng.js';
import { api, killAllServes, startServe, type ServeProcess } from '../support/serve.js';
import { publicKeyToPem } from '../../src/lib/crypto/ed25519-pem.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';

/** Short, so that the suite's rounds are short; docs/replication.md asks 60 s or less in production. */
const ARCHIVE_TIMEOUT_S = 2;
const ROUNDS = Number(process.env.PG_HOST_LOSS_ROUNDS ?? 20);
const PACE_MS = Number(process.env.HOST_LOSS_PACE_MS ?? 10);
/** The daemons of a restored store know the token: the bootstrap one is shown once only. */
const TOKEN = 'pg-wal-archiving-admin-token-0123456789';

/**
 * Issue 37, Deliver 2 and "Done when": PostgreSQL's WAL archived by pgBackRest, set up as
 * docs/replication.md says, in a private cluster (the shared server on 5432 archives nothing
 * and must not be touched). The host is lost by killing the server and deleting its data
 * directory; pgBackRest restores it from its repository alone.
 */
describe('PostgreSQL WAL archiving by pgBackRest: status, point-in-time restore, host loss [postgres]', function () {
  let archiving: ArchivingPostgres | undefined;
  let work: string;

  before(async function () {
    this.timeout(scaledMs(120_000));
    const missing = pgbackrestMissing();
    if (missing) {
      if (process.env.CI === 'true') throw new Error(`pgBackRest is required under CI=true: ${missing}`);
      console.warn(`    (skipping: ${missing})`);
      this.skip();
    }
    archiving = await startArchivingPostgres({ archiveTimeoutSeconds: ARCHIVE_TIMEOUT_S });
  });
  after(async () => {
    await archiving?.destroy();
  });
  beforeEach(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-pg-archiving-'));
  });
  afterEach(() => {
    killAllServes();
    rmSync(work, { recursive: true, force: true });
  });

  const cluster = () => archiving!;
  let databases = 0;
  const serveOn = async (databaseUrl: string) => startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_DATA_DIR: path.join(work, 'data'), LICENSE_CLIENT_RATE_LIMIT: '0', LICENSE_ADMIN_TOKEN: TOKEN });
  const newDatabase = () => cluster().cluster.createDatabase(`license_${(databases += 1)}`);
  const customerNames = async (serve: ServeProcess) => {
    const answer = await api(serve.url, 'GET', '/api/customers', { token: TOKEN });
    assert.equal(answer.status, 200, answer.text);
    return (answer.body as Array<{ name: string }>).map((customer) => customer.name).sort();
  };

  it('reports archiving in backup status, the API and /metrics, failing while archive_command fails; restores to a moment before a mistake, and the daemon serves that state', async function () {
    this.timeout(scaledMs(180_000));
    const databaseUrl = await newDatabase();
    const serve = await serveOn(databaseUrl);
    const token = TOKEN;
    const customer = await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Ada' } });
    const license = await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.body.id, type: 'time_based', valid_until: '2099-12-31' } });
    assert.equal(license.status, 201, license.text);
    await cluster().archiveNow();

    const status = await api(serve.url, 'GET', '/api/backups/status', { token });
    assert.equal(status.body.wal_archiving.state, 'ok', JSON.stringify(status.body.wal_archiving));
    assert.equal(status.body.wal_archiving.archive_timeout_seconds, ARCHIVE_TIMEOUT_S);
    assert.ok(status.body.wal_archiving.archived_count > 0);
    const cliEnv = { LICENSE_DATABASE_URL: databaseUrl, LICENSE_DATA_DIR: path.join(work, 'data') };
    const table = ok(await runCli(['backup', 'status'], { env: cliEnv, cwd: work })).stdout;
    assert.match(table, /^WAL archiving \(PostgreSQL\): ok, last archived [0-9A-F]{24} \d+m \d+s ago, archive_timeout 2s$/m);
    const metrics = (await api(serve.url, 'GET', '/metrics', { token })).text.split('\n').filter((line) => line.startsWith('license_server_wal_archive')).join('\n');
    assert.match(metrics, /^license_server_wal_archive_state\{state="ok"\} 1$/m, metrics);
    assert.match(metrics, /^license_server_wal_archive_last_success_timestamp_seconds \d+(\.\d+)?$/m, metrics);

    // archive_command fails: PostgreSQL keeps the WAL and retries; the status says so.
    // Put back in a finally: the next test's rounds need archiving to work.
    try {
      await cluster().sql("ALTER SYSTEM SET archive_command = 'false'");
      await cluster().sql('SELECT pg_reload_conf()');
      await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'While archiving fails' } });
      await cluster().sql('SELECT pg_switch_wal()');
      const deadline = Date.now() + scaledMs(30_000);
      let failing = status.body.wal_archiving;
      while (failing.state !== 'failing') {
        if (Date.now() > deadline) assert.fail(`archiving did not show as failing: ${JSON.stringify(failing)}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
        failing = (await api(serve.url, 'GET', '/api/backups/status', { token })).body.wal_archiving;
      }
      assert.ok(failing.failed_count > 0 && failing.problem.includes('failed'), JSON.stringify(failing));
      assert.match(ok(await runCli(['backup', 'status'], { env: cliEnv, cwd: work })).stdout, /^WAL archiving \(PostgreSQL\): failing, .*\n {2}archiving [0-9A-F]{24} failed at /m);
      const failingMetrics = (await api(serve.url, 'GET', '/metrics', { token })).text.split('\n').filter((line) => line.startsWith('license_server_wal_archive')).join('\n');
      assert.match(failingMetrics, /^license_server_wal_archive_state\{state="failing"\} 1$/m, failingMetrics);
    } finally {
      await cluster().sql('ALTER SYSTEM RESET archive_command');
      await cluster().sql('SELECT pg_reload_conf()');
    }
    await cluster().archiveNow();

    // Before the mistake, a moment; then the mistake (a license cut short) and a write after it.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const beforeMistake = new Date();
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const cut = await api(serve.url, 'PATCH', `/api/licenses/${license.body.id}`, { token, body: { valid_until: '2026-12-31' } });
    assert.equal(cut.status, 200, cut.text);
    await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'After the mistake' } });
    await cluster().archiveNow();
    await serve.stop('SIGKILL');
    // This tool's --to-time is Litestream's; it points a PostgreSQL operator to pgBackRest.
    const toTime = await runCli(['backup', 'restore', '--to-time', beforeMistake.toISOString(), '--target', 'offsite'], { env: cliEnv, cwd: work });
    assert.equal(toTime.code, 2, toTime.stderr);
    assert.match(toTime.stderr, /PostgreSQL store is restored to a time by pgBackRest/);

    await cluster().loseAndRestore(beforeMistake);
    const restored = await serveOn(databaseUrl);
    assert.deepEqual(await customerNames(restored), ['Ada', 'While archiving fails']);
    const kept = await api(restored.url, 'GET', `/api/licenses/${license.body.id}`, { token: TOKEN });
    assert.equal(kept.status, 200, kept.text);
    assert.match(kept.body.valid_until, /^2100-01-01T00:00:00/, 'valid through 2099-12-31, as before the mistake');
    assert.equal((await restored.stop()).code, 0);
  });

  it(`loses no write acknowledged more than twice archive_timeout and the archiving's own time before the host, ${ROUNDS} rounds under load; the files signed before verify`, async function () {
    this.timeout(scaledMs(ROUNDS * 60_000));
    const seed = faultSeed();
    const random = prng(seed);
    const databaseUrl = await newDatabase();
    // The archiving's own time, measured here and now (a busy machine's is longer): a WAL file
    // ended, pgbackrest archive-push run on it, PostgreSQL told. Twice the longest of three.
    let archivingMs = 0;
    for (let i = 0; i < 3; i += 1) {
      const started = Date.now();
      await cluster().archiveNow();
      archivingMs = Math.max(archivingMs, Date.now() - started);
    }
    // Twice archive_timeout: PostgreSQL's checkpointer switches WAL files when it wakes and
    // finds the timeout passed, which a run of 20 rounds saw up to 0.8 s after it. And a margin
    // that grows with the machine's load: CI at load 10 saw a window of 6.2 s (archive-push 1 s).
    const windowMs = 2 * ARCHIVE_TIMEOUT_S * 1000 + 2 * archivingMs + scaledMs(500);
    const windows: number[] = [];
    let lostInAll = 0;
    for (let round = 0; round < ROUNDS; round += 1) {
      const serve = await serveOn(databaseUrl);
      const token = TOKEN;
      const customer = await api(serve.url, 'POST', '/api/customers', { token, body: { name: `Round ${round}` } });
      const license = await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.body.id, type: 'time_based', valid_until: '2099-12-31', max_machines: 100_000 } });
      assert.equal(license.status, 201, license.text);
      const publicKey: string = (await api(serve.url, 'GET', '/api/signing-key', { token })).body.public_key_pem;

      const lossAfterMs = windowMs + 1000 + random() * 3000;
      let lost = false;
      const load = loadUntil(serve, customer.body.id, license.body, () => lost, PACE_MS, TOKEN);
      await new Promise((resolve) => setTimeout(resolve, lossAfterMs));
      const lossAt = Date.now();
      await cluster().cluster.kill();
      serve.child.kill('SIGKILL');
      lost = true;
      const acknowledged: Acknowledged[] = await load;
      await serve.stop('SIGKILL');
      await cluster().loseAndRestore();

      const present = await presentWrites(databaseUrl);
      const isPresent = (write: Acknowledged) => (write.kind === 'license' ? present.licenses : present.machines).has(write.id);
      const old = acknowledged.filter((write) => write.at < lossAt - windowMs);
      const missing = old.filter((write) => !isPresent(write));
      assert.equal(missing.length, 0, `round ${round} (FAULT_SEED=${seed}): ${missing.length} writes acknowledged over ${windowMs} ms before the loss are missing, the oldest ${lossAt - Math.min(...missing.map((write) => write.at))} ms before it`);
      const lostWrites = acknowledged.filter((write) => !isPresent(write));
      lostInAll += lostWrites.length;
      // The window: how long before the loss the oldest lost write was acknowledged.
      const window = lostWrites.length === 0 ? 0 : lossAt - Math.min(...lostWrites.map((write) => write.at));
      windows.push(window);
      // The files verify against the restored store's key (read from it: the next round's daemon serves it).
      assert.equal(present.publicKeys.length, 1, 'one signing key');
      const restoredKey = publicKeyToPem(present.publicKeys[0]!);
      assert.equal(restoredKey.trim(), publicKey.trim());
      for (const write of acknowledged.filter((entry) => entry.licenseFile)) verifyLicenseFile(write.licenseFile!, { publicKey: restoredKey, hardwareId: write.id });
      console.log(`      round ${round + 1}: loss ${Math.round(lossAfterMs)} ms into the load; ${acknowledged.length} writes acknowledged, ${old.length} older than ${windowMs} ms all restored; ${lostWrites.length} lost, the oldest acknowledged ${window} ms before the loss`);
    }
    const sorted = [...windows].sort((a, b) => a - b);
    console.log(`      ${ROUNDS} rounds (FAULT_SEED=${seed}), archive_timeout ${ARCHIVE_TIMEOUT_S} s, archiving a file ${archivingMs} ms at most: ${lostInAll} writes lost in all; the window lost (oldest lost write before the loss) p50 ${sorted[Math.floor(sorted.length / 2)]} ms, max ${sorted.at(-1)} ms`);
  });
});

/** The licenses, machines (by hardware ID) and signing keys' public halves of the restored store. */
async function presentWrites(databaseUrl: string): Promise<{ licenses: Set<string>; machines: Set<string>; publicKeys: Uint8Array[] }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const licenses = new Set((await client.query<{ id: string }>('SELECT id FROM licenses')).rows.map((row) => row.id));
    const machines = new Set((await client.query<{ hardware_id: string }>('SELECT hardware_id FROM machines')).rows.map((row) => row.hardware_id));
    const publicKeys = (await client.query<{ public_key: Buffer }>('SELECT public_key FROM signing_keys')).rows.map((row) => new Uint8Array(row.public_key));
    return { licenses, machines, publicKeys };
  } finally {
    await client.end();
  }
}
