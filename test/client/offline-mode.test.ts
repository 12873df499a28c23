import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import path from 'node:path';
import { LicenseClient, LicenseClientConfigError, LicenseClientError } from '../../src/client/index.js';
import { startBlackHole } from '../support/black-hole.js';
import { scaledMs } from '../support/busy-machine.js';
import { eventually, FakeClock } from '../support/fake-clock.js';
import { CountingProxy, LicenseFixture } from '../support/license-fixture.js';

const VALIDATE = '/api/v1/validate';

/** Every TCP connection this process opens while `body` runs (Node publishes each on this channel). */
async function connectionsDuring(body: () => Promise<void>): Promise<number> {
  let count = 0;
  const onSocket = () => (count += 1);
  diagnostics.subscribe('net.client.socket', onSocket);
  try {
    await body();
  } finally {
    diagnostics.unsubscribe('net.client.socket', onSocket);
  }
  return count;
}

async function timed<T>(body: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await body();
  return { value, ms: performance.now() - start };
}

describe('the client on an air-gapped machine and behind a black hole', function () {
  this.timeout(60_000);
  let fixture: LicenseFixture;
  let validUntil: number;
  let n = 0;
  const cacheDir = () => path.join(fixture.work, `cache-${++n}`);

  before(async () => {
    fixture = await LicenseFixture.start();
    validUntil = Date.parse(JSON.parse(Buffer.from(readFileSync(fixture.license.licenseFile, 'utf8'), 'base64').toString()).valid_until);
  });
  afterEach(() => fixture.closeClients());
  after(() => fixture?.cleanup());

  describe('offline mode (no serverAddr, or mode: "offline")', () => {
    it('answers from the .lic file without opening a single connection, and reports how long the file stays valid', async () => {
      const clock = new FakeClock();
      const entered: number[] = [];
      const c = fixture.client({ serverAddr: undefined, clock, onOfflineModeEnter: (remaining) => entered.push(remaining), offline: { cacheDir: cacheDir() } });
      assert.equal(c.isOffline, true, 'offline from the start');
      let first: Awaited<ReturnType<LicenseClient['validate']>> | undefined;
      const connections = await connectionsDuring(async () => {
        first = await c.validate();
        await c.validate();
        assert.deepEqual(await c.reportUsage('seats', 2), { accepted: false, queued: true });
      });
      assert.equal(connections, 0, 'no network call at all');
      assert.equal(first!.valid, true, JSON.stringify(first!.failures));
      assert.equal(first!.source, 'license-file');
      assert.equal(first!.isOffline, true);
      assert.equal(first!.decryptionKey?.length, 32);
      assert.equal(first!.hasEntitlement('export'), false, 'restricted entitlements apply');
      assert.equal(first!.hasEntitlement('seats'), true);
      assert.deepEqual(entered, [validUntil - clock.now().getTime()], 'entered once, with the file\'s remaining validity');
      assert.ok(entered[0]! > 29 * 86_400_000, 'about the 30 days the file was checked out for');
      assert.equal(clock.pending().length, 1, 'the file\'s end is the only timer: no reconnect loop');
    });

    it('with mode "offline" ignores a serverAddr that answers, and release() says why it cannot', async () => {
      let requests = 0;
      const server: Server = createHttpServer((_, res) => {
        requests += 1;
        res.writeHead(500).end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const c = fixture.client({ mode: 'offline', serverAddr: `127.0.0.1:${(server.address() as AddressInfo).port}`, offline: { cacheDir: cacheDir() } });
        assert.equal((await c.validate()).source, 'license-file');
        await assert.rejects(c.release(), (error: unknown) => error instanceof LicenseClientError && error.code === 'OFFLINE_ONLY');
        const quiet = fixture.client({ mode: 'offline', offline: { cacheDir: cacheDir(), allowOfflineUsageReporting: false } });
        await assert.rejects(quiet.reportUsage('seats', 1), (error: unknown) => error instanceof LicenseClientError && error.code === 'OFFLINE_ONLY');
        assert.equal(requests, 0);
      } finally {
        server.close();
      }
    });

    it('fires onGracePeriodExpired once when the file runs out, refuses from then on, and starts over with a new file', async () => {
      const clock = new FakeClock();
      let expired = 0;
      const licenseFile = path.join(fixture.work, `expiring-${++n}.lic`);
      copyFileSync(fixture.license.licenseFile, licenseFile);
      const c = fixture.client({ serverAddr: undefined, clock, onGracePeriodExpired: () => (expired += 1), offline: { cacheDir: cacheDir(), licenseFile } });
      assert.equal((await c.validate()).valid, true);
      clock.advance(validUntil - clock.now().getTime() - 1000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(expired, 0, 'a second before the end the file still holds');
      clock.advance(1000);
      await eventually(() => expired === 1, 'the end of the file fired the callback');
      const after = await c.validate();
      assert.equal(after.valid, false);
      assert.equal(after.reason, 'LICENSE_EXPIRED');
      assert.deepEqual(after.failures.map((failure) => failure.tier), ['license-file'], 'no online tier, no grace token');
      assert.equal(expired, 1, 'once');

      // The vendor sends a new file, valid for 60 days from the server's (real) now.
      const renewed = await fixture.api('POST', `/api/licenses/${fixture.license.id}/checkout`, { ttl_days: 60, hardware_id: 'test-machine' });
      writeFileSync(licenseFile, renewed.body.license_file);
      const renewedUntil = Date.parse(JSON.parse(Buffer.from(renewed.body.license_file, 'base64').toString()).valid_until);
      assert.equal((await c.validate()).valid, true, 'the new file answers');
      clock.advance(renewedUntil - clock.now().getTime());
      await eventually(() => expired === 2, 'the end of the new file fired the callback again');
    });

    it('still refuses a clock set back', async () => {
      const clock = new FakeClock();
      const dir = cacheDir();
      const c = fixture.client({ serverAddr: undefined, clock, offline: { cacheDir: dir } });
      assert.equal((await c.validate()).valid, true);
      clock.set(new Date(clock.now().getTime() - 48 * 3_600_000));
      const rolledBack = await c.validate();
      assert.equal(rolledBack.valid, false);
      assert.equal(rolledBack.reason, 'CLOCK_ROLLBACK');
    });

    it('refuses options it cannot work with, in the words docs/client.md uses', () => {
      const base = { licenseKey: fixture.license.key, version: '1.0.0' };
      const refused = (options: object) => {
        try {
          new LicenseClient(options as never).close();
        } catch (error) {
          assert.ok(error instanceof LicenseClientConfigError);
          return error.message;
        }
        return 'accepted';
      };
      assert.equal(refused(base), 'server address must be <host>:<port>', 'no server and no offline mode');
      assert.equal(refused({ ...base, mode: 'offline' }), 'offline mode needs offline.enabled: true');
      assert.equal(refused({ ...base, mode: 'air-gapped' }), 'mode must be "online" or "offline"');
      assert.equal(refused({ ...base, mode: 'online', offline: { enabled: true, licenseFile: 'x.lic', publicKey: fixture.pem } }), 'server address must be <host>:<port>');
      assert.equal(refused({ ...base, offline: { enabled: true, publicKey: fixture.pem } }), 'license file path is required');
      assert.equal(refused({ ...base, serverAddr: '127.0.0.1:1', connectTimeout: 0 }), 'connectTimeout must be a positive number of milliseconds');
      const doc = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8');
      for (const message of ['offline mode needs offline.enabled: true', 'mode must be "online" or "offline"', 'connectTimeout must be a positive number of milliseconds']) {
        assert.ok(doc.includes(message), `docs/client.md lists "${message}"`);
      }
    });
  });

  describe('a server that does not answer', () => {
    let hole: Awaited<ReturnType<typeof startBlackHole>>;
    before(async function () {
      hole = await startBlackHole();
      // The test means nothing unless connecting there really hangs (a refusal would be instant).
      const [host, port] = hole.addr.split(':');
      const outcome = await new Promise<string>((resolve) => {
        const socket = connect(Number(port), host);
        socket.once('connect', () => resolve('connected'));
        socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
        setTimeout(() => resolve('hangs'), 700);
      }).catch(() => 'error');
      assert.equal(outcome, 'hangs', 'the black hole swallows connection attempts');
    });
    after(() => hole?.stop());

    it('costs one connect budget (1 s here), not the 10 s request timeout; later calls answer at once from the offline tiers', async () => {
      const c = fixture.client({ serverAddr: hole.addr, requestTimeout: 10_000, connectTimeout: 1_000, offline: { cacheDir: cacheDir() } });
      const first = await timed(() => c.validate());
      assert.equal(first.value.source, 'license-file', JSON.stringify(first.value.failures));
      assert.ok(first.ms >= 900, `waited for the budget (${first.ms.toFixed(0)} ms)`);
      assert.ok(first.ms < 5_000, `gave up well before the request timeout (${first.ms.toFixed(0)} ms)`);
      const later = await timed(async () => {
        for (let i = 0; i < 5; i += 1) assert.equal((await c.validate()).source, 'license-file');
      });
      assert.ok(later.ms < scaledMs(900), `five more validations took ${later.ms.toFixed(0)} ms: no new connection attempt`);
    });

    it('has a default budget of a few seconds, well under the request timeout', async () => {
      const c = fixture.client({ serverAddr: hole.addr, requestTimeout: 10_000, offline: { cacheDir: cacheDir() } });
      const first = await timed(() => c.validate());
      assert.equal(first.value.source, 'license-file');
      assert.ok(first.ms >= 2_700 && first.ms < 7_000, `3 s by default (${first.ms.toFixed(0)} ms)`);
    });

    it('after a server that accepted and never answered, leaves the network to the reconnect loop, which brings it back', async () => {
      const LOOP_MS = 2000;
      const proxy = await CountingProxy.start(() => fixture.serve!.url);
      try {
        let exited = 0;
        const c = fixture.client({
          serverAddr: proxy.addr,
          requestTimeout: 500,
          offline: { cacheDir: cacheDir(), retryInterval: LOOP_MS, maxRetryInterval: LOOP_MS },
          onOfflineModeExit: () => (exited += 1),
        });
        proxy.hanging = true;
        const first = await timed(() => c.validate());
        assert.equal(first.value.source, 'license-file');
        assert.ok(first.ms >= 450, `waited for the request timeout (${first.ms.toFixed(0)} ms)`);
        const sent = proxy.count(VALIDATE);
        const later = await timed(async () => {
          for (let i = 0; i < 5; i += 1) assert.equal((await c.validate()).source, 'license-file');
        });
        // Five answers from the offline tiers, sooner than five request timeouts (2.5 s) would
        // be on an idle machine; the count below proves nothing was sent, so the bound stretches
        // with the load.
        assert.ok(later.ms < scaledMs(2000), `${later.ms.toFixed(0)} ms`);
        // The loop's own attempts: one per LOOP_MS of the window (a loaded machine stretched it
        // past one interval in CI). validate() sending its own would add 5, each 500 ms long.
        const loopAttempts = 1 + Math.floor(later.ms / LOOP_MS);
        assert.ok(proxy.count(VALIDATE) <= sent + loopAttempts, `validate() sent nothing itself (at most the loop's own ${loopAttempts} attempts)`);
        proxy.hanging = false;
        await eventually(() => exited === 1, 'the reconnect loop brought the client back');
        assert.equal(c.isOffline, false);
        assert.equal((await c.validate()).source, 'online');
      } finally {
        await proxy.close();
      }
    });
  });
});
