import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadUntil, type Acknowledged } from '../support/host-loss-load.js';
import { faultSeed } from '../support/kill-moments.js';
import { prng } from '../support/prng.js';
import { replicationFixture } from '../support/replication.js';
import { api, killAllServes, startServe, type ServeProcess } from '../support/serve.js';
import { ok, runCli } from '../support/cli.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { findLitestream } from '../../src/lib/replication/litestream-binary.js';

const ROUNDS = Number(process.env.HOST_LOSS_ROUNDS ?? 20);
/**
 * Each client's pause between its requests: about 200 writes a second in all on an idle
 * machine, far past a license business's rate, without the clients taking both cores (at full
 * speed they wrote 400 a second and cost the suite 160 CPU seconds over 20 rounds).
 */
const PACE_MS = Number(process.env.HOST_LOSS_PACE_MS ?? 10);
const SYNC_INTERVAL_MS = 1000;

/**
 * Issue 37, "Done when": a host dies under load. Each round a daemon replicating to a file
 * target takes license creations, checkouts and activations from three paced clients that record
 * what was acknowledged and when; at a random moment serve and its Litestream are SIGKILLed
 * together and the data directory is deleted; the database is restored from the target alone
 * (docs/replication.md, by hand). Every write acknowledged more than the sync interval plus
 * 1 s before the loss must be there; the newer ones lost are counted and printed, and every
 * .lic file signed before the loss verifies against the restored signing key.
 */
describe(`a lost host, ${ROUNDS} rounds under load, restored from the replica alone [sqlite]`, function () {
  let work: string;
  let litestream: string;
  const seed = faultSeed();
  const random = prng(seed);
  const { environment, databaseOf, caughtUp, restoreByHand, column, status } = replicationFixture({ work: () => work, litestream: () => litestream });

  before(async function () {
    litestream = (await findLitestream(undefined)).binary;
  });
  beforeEach(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-host-loss-'));
  });
  afterEach(() => {
    killAllServes();
    rmSync(work, { recursive: true, force: true });
  });

  it('loses no write acknowledged more than the sync interval and 1 s before, and the files signed before verify', async function () {
    this.timeout(ROUNDS * 60_000);
    const lostPerRound: number[] = [];
    const windowMs = SYNC_INTERVAL_MS + 1000;
    for (let round = 0; round < ROUNDS; round += 1) {
      const serve = await startServe(environment({ LICENSE_CLIENT_RATE_LIMIT: '0' }));
      const customer = await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name: `Round ${round}` } });
      const license = await api(serve.url, 'POST', '/api/licenses', { token: serve.token!, body: { customer_id: customer.body.id, type: 'time_based', valid_until: '2099-12-31', max_machines: 100_000 } });
      assert.equal(license.status, 201, license.text);
      const ready = await caughtUp(serve);
      const databasePath = databaseOf(serve);
      const publicKeyBefore: string = (await api(serve.url, 'GET', '/api/signing-key', { token: serve.token! })).body.public_key_pem;

      // The loss: 1.5 to 5 s into the load, serve and Litestream at the same moment.
      const lossAfterMs = 1500 + random() * 3500;
      let lost = false;
      const load = loadUntil(serve, customer.body.id, license.body, () => lost, PACE_MS);
      await new Promise((resolve) => setTimeout(resolve, lossAfterMs));
      const litestreamPid = (await status(serve)).pid ?? ready.pid;
      const lossAt = Date.now();
      process.kill(litestreamPid, 'SIGKILL');
      serve.child.kill('SIGKILL');
      lost = true;
      const acknowledged = await load;
      await serve.stop('SIGKILL');
      rmSync(path.dirname(databasePath), { recursive: true, force: true });

      const restored = await restoreByHand(databasePath);
      const licenses = new Set(await column(restored, 'SELECT id FROM licenses'));
      const machines = new Set(await column(restored, 'SELECT hardware_id FROM machines'));
      const present = (write: Acknowledged) => (write.kind === 'license' ? licenses : machines).has(write.id);
      const old = acknowledged.filter((write) => write.at < lossAt - windowMs);
      const missing = old.filter((write) => !present(write));
      const describeMissing = () => ['license', 'checkout', 'activation'].map((kind) => {
        const ofKind = missing.filter((write) => write.kind === kind);
        return `${kind}: ${ofKind.length} of ${old.filter((write) => write.kind === kind).length}${ofKind.length > 0 ? ` (acknowledged ${Math.round(lossAt - Math.max(...ofKind.map((write) => write.at)))} to ${Math.round(lossAt - Math.min(...ofKind.map((write) => write.at)))} ms before the loss)` : ''}`;
      }).join('; ');
      assert.equal(missing.length, 0, `round ${round} (FAULT_SEED=${seed}): writes acknowledged over ${windowMs} ms before the loss are missing: ${describeMissing()}`);
      const recent = acknowledged.filter((write) => write.at >= lossAt - windowMs);
      const lostRecent = recent.filter((write) => !present(write)).length;
      lostPerRound.push(lostRecent);

      // The restored signing key is the one the files were signed with.
      const publicKey = ok(await runCli(['signing-key', 'show'], { env: { LICENSE_DATABASE_URL: restored }, cwd: work })).stdout;
      assert.equal(publicKey.trim(), publicKeyBefore.trim());
      for (const write of acknowledged.filter((entry) => entry.licenseFile)) verifyLicenseFile(write.licenseFile!, { publicKey, hardwareId: write.id });
      console.log(`      round ${round + 1}: loss ${Math.round(lossAfterMs)} ms into the load; ${acknowledged.length} writes acknowledged, ${old.length} older than ${windowMs} ms all restored; of the ${recent.length} newer, ${lostRecent} lost`);
      rmSync(restored);
    }
    const total = lostPerRound.reduce((sum, count) => sum + count, 0);
    console.log(`      ${ROUNDS} rounds (FAULT_SEED=${seed}): at most ${Math.max(...lostPerRound)} writes lost in a round, ${total} in all, all within the last ${windowMs} ms before the loss`);
  });
});
