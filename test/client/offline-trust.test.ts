import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { ValidationResult } from '../../src/client/index.js';
import { FakeClock } from '../support/fake-clock.js';
import { LicenseFixture, type FixtureLicense } from '../support/license-fixture.js';

const HOUR = 3_600_000;

const codes = (result: ValidationResult) => result.failures.map((failure) => failure.code);

describe('what the client trusts offline: revocations, the trusted time, an unwritable cache', function () {
  this.timeout(60_000);
  let fixture: LicenseFixture;
  let n = 0;
  let cacheDir: string;

  before(async () => {
    fixture = await LicenseFixture.start();
  });
  beforeEach(async () => {
    cacheDir = path.join(fixture.work, `cache-${(n += 1)}`);
    if (!fixture.serve) await fixture.startServer();
  });
  afterEach(() => fixture.closeClients());
  after(() => fixture.cleanup());

  const stateDir = () => path.join(cacheDir, readdirSync(cacheDir)[0]!);
  const missingLic = () => path.join(fixture.work, 'missing.lic');

  describe('a license the server revoked', () => {
    let license: FixtureLicense;
    beforeEach(async () => {
      license = await fixture.createLicense();
    });

    it('is refused by the .lic file and the grace token, across restarts, until the server says valid again', async () => {
      const c = fixture.client({ offline: { cacheDir } }, license);
      assert.equal((await c.validate()).source, 'online');
      await fixture.api('POST', `/api/licenses/${license.id}/deactivate`);
      assert.equal((await c.validate()).reason, 'LICENSE_INACTIVE');
      assert.ok(existsSync(path.join(stateDir(), 'revoked.json')), 'the verdict is on disk');

      await fixture.stopServer();
      const offline = await c.validate();
      assert.equal(offline.valid, false, 'the .lic file does not revive a revoked license');
      assert.deepEqual(codes(offline), ['SERVER_UNREACHABLE', 'LICENSE_REVOKED', 'LICENSE_REVOKED']);
      assert.equal(offline.reason, 'LICENSE_REVOKED');
      assert.match(offline.failures[1]!.message, /LICENSE_INACTIVE/, 'with the server\'s reason');
      const restarted = await fixture.client({ offline: { cacheDir } }, license).validate();
      assert.deepEqual(codes(restarted), ['SERVER_UNREACHABLE', 'LICENSE_REVOKED', 'LICENSE_REVOKED'], 'a new process remembers it');
      const saved = readFileSync(path.join(stateDir(), 'revoked.json'));
      rmSync(path.join(stateDir(), 'revoked.json'));
      const deleted = await fixture.client({ offline: { cacheDir } }, license).validate();
      assert.deepEqual(codes(deleted), ['SERVER_UNREACHABLE', 'LICENSE_REVOKED', 'LICENSE_REVOKED'], 'clock.json keeps a copy of the verdict');
      writeFileSync(path.join(stateDir(), 'revoked.json'), saved);

      await fixture.startServer();
      await fixture.api('POST', `/api/licenses/${license.id}/activate`);
      assert.equal((await c.validate()).source, 'online');
      assert.ok(!existsSync(path.join(stateDir(), 'revoked.json')), 'a valid answer lifts the verdict');
      await fixture.stopServer();
      const again = await fixture.client({ offline: { cacheDir } }, license).validate();
      assert.equal(again.valid, true, JSON.stringify(again.failures));
      assert.equal(again.source, 'license-file');
    });

    it('stays refused offline when the verdict cannot be written to the cache', async () => {
      writeFileSync(path.join(fixture.work, `file-${n}`), 'a regular file');
      const c = fixture.client({ offline: { cacheDir: path.join(fixture.work, `file-${n}`, 'cache') } }, license);
      await fixture.api('POST', `/api/licenses/${license.id}/deactivate`);
      const revoked = await c.validate();
      assert.equal(revoked.reason, 'LICENSE_INACTIVE');
      assert.equal(revoked.warnings[0]?.code, 'CACHE_NOT_WRITTEN');
      await fixture.stopServer();
      assert.deepEqual(codes(await c.validate()), ['SERVER_UNREACHABLE', 'LICENSE_REVOKED', 'LICENSE_REVOKED']);
    });

    it('is not inferred from a 5xx, a 429 or a 4xx error: the .lic file still answers', async () => {
      const answers = [
        [503, '{"error":{"code":"UNAVAILABLE","message":"maintenance"}}'],
        [429, '{"error":{"code":"RATE_LIMITED","message":"slow down"}}'],
        [400, '{"error":{"code":"INVALID_INPUT","message":"version must be the application version"}}'],
      ] as const;
      let next = 0;
      const server: Server = createHttpServer((_, res) => {
        const [status, body] = answers[next++]!;
        res.writeHead(status, { 'content-type': 'application/json' }).end(body);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const c = fixture.client({ serverAddr: `127.0.0.1:${(server.address() as AddressInfo).port}`, offline: { cacheDir } }, license);
        assert.equal((await c.validate()).source, 'license-file', 'after a 503');
        assert.equal((await c.validate()).source, 'license-file', 'after a 429');
        assert.equal((await c.validate()).reason, 'INVALID_INPUT', 'a 4xx error is returned as is');
      } finally {
        server.close();
      }
      await fixture.stopServer();
      const offline = await fixture.client({ offline: { cacheDir } }, license).validate();
      assert.equal(offline.source, 'license-file', JSON.stringify(offline.failures));
    });
  });

  it('answers valid online when the cache directory cannot be written, and says why in warnings', async () => {
    const blocker = path.join(fixture.work, `blocker-${n}`);
    writeFileSync(blocker, 'a regular file where the cache directory should be');
    const c = fixture.client({ offline: { cacheDir: path.join(blocker, 'cache') } });
    const result = await c.validate();
    assert.equal(result.valid, true, JSON.stringify(result.failures));
    assert.equal(result.source, 'online');
    assert.equal(result.decryptionKey?.length, 32);
    assert.equal(result.warnings.length, 1);
    assert.equal(result.warnings[0]!.code, 'CACHE_NOT_WRITTEN');
    assert.match(result.warnings[0]!.message, /blocker-\d+.*a parent is not a directory/);

    await fixture.stopServer();
    const offline = await c.validate();
    assert.equal(offline.valid, true, JSON.stringify(offline.failures));
    assert.equal(offline.source, 'license-file');
    assert.equal(offline.warnings[0]?.code, 'CACHE_NOT_WRITTEN');
  });

  it('advances the trusted time on failed offline checks too: after expiry was seen at +73 h, +71 h is a rollback', async () => {
    const clock = new FakeClock();
    const start = clock.now().getTime();
    const c = fixture.client({ clock, offline: { cacheDir, licenseFile: missingLic() } });
    assert.equal((await c.validate()).source, 'online');
    await fixture.stopServer();
    clock.set(new Date(start + 73 * HOUR));
    assert.deepEqual(codes(await c.validate()), ['SERVER_UNREACHABLE', 'LICENSE_FILE_UNREADABLE', 'GRACE_TOKEN_EXPIRED']);
    clock.set(new Date(start + 71 * HOUR));
    const back = await c.validate();
    assert.equal(back.valid, false, 'the expired grace token does not come back with the clock set back');
    assert.deepEqual(codes(back), ['SERVER_UNREACHABLE', 'CLOCK_ROLLBACK', 'CLOCK_ROLLBACK']);
    const restarted = await fixture.client({ clock, offline: { cacheDir, licenseFile: missingLic() } }).validate();
    assert.deepEqual(codes(restarted), ['SERVER_UNREACHABLE', 'CLOCK_ROLLBACK', 'CLOCK_ROLLBACK'], 'kept on disk');
  });

  it('refuses the offline tiers after clock.json was corrupted, until an online validation re-establishes the trusted time', async () => {
    assert.equal((await fixture.client({ offline: { cacheDir } }).validate()).source, 'online');
    await fixture.stopServer();
    writeFileSync(path.join(stateDir(), 'clock.json'), '{"latest": ');
    for (const attempt of ['first', 'second']) {
      const result = await fixture.client({ offline: { cacheDir } }).validate();
      assert.deepEqual(codes(result), ['SERVER_UNREACHABLE', 'CLOCK_UNTRUSTED', 'CLOCK_UNTRUSTED'], `${attempt} offline check`);
      assert.match(result.failures[1]!.message, /clock\.json/);
    }
    await fixture.startServer();
    assert.equal((await fixture.client({ offline: { cacheDir } }).validate()).source, 'online');
    await fixture.stopServer();
    assert.equal((await fixture.client({ offline: { cacheDir } }).validate()).source, 'license-file');
  });

  it('treats a deleted clock.json as suspect while a grace token is cached, and an empty cache as a first run', async () => {
    assert.equal((await fixture.client({ offline: { cacheDir } }).validate()).source, 'online');
    await fixture.stopServer();
    rmSync(path.join(stateDir(), 'clock.json'));
    const deleted = await fixture.client({ offline: { cacheDir } }).validate();
    assert.deepEqual(codes(deleted), ['SERVER_UNREACHABLE', 'CLOCK_UNTRUSTED', 'CLOCK_UNTRUSTED']);
    assert.match(deleted.failures[1]!.message, /clock\.json/);

    const fresh = path.join(fixture.work, `fresh-${n}`);
    const first = await fixture.client({ offline: { cacheDir: fresh } }).validate();
    assert.equal(first.source, 'license-file', JSON.stringify(first.failures));
    assert.ok(existsSync(path.join(fresh, readdirSync(fresh)[0]!, 'clock.json')), 'the first run starts the trusted time');
  });
});
