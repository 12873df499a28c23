import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, statfsSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { LicenseClientError, type ValidationResult } from '../../src/client/index.js';
import { ClientStore } from '../../src/client/store.js';
import { FakeClock } from '../support/fake-clock.js';
import { CountingProxy, freePort, LicenseFixture, type FixtureLicense } from '../support/license-fixture.js';

const DAY = 86_400_000;

const codes = (result: ValidationResult) => result.failures.map((failure) => failure.code);
const warnings = (result: ValidationResult) => result.warnings.map((warning) => `${warning.code}: ${warning.message}`);

/**
 * The "bad input" list against a real serve. Covered elsewhere: a .lic for another
 * machine and one signed by a key not in the set (license-client.test.ts, "ends every bad
 * situation in a reason"), one naming a key id the set lacks (key-sets.test.ts), a clock set
 * back (license-client.test.ts and offline-trust.test.ts) and grace.hours of a year
 * (long-timers.test.ts). Answers that are not the API's are transport.ts's own tests.
 */
describe('bad input: damaged .lic files, a cache on a read-only or full disk', function () {
  this.timeout(60_000);
  let fixture: LicenseFixture;
  let unreachable: string;
  let n = 0;
  const mounted: string[] = [];

  before(async () => {
    fixture = await LicenseFixture.start();
    // Nothing listens here: the client goes to its offline tiers at once.
    unreachable = `127.0.0.1:${await freePort()}`;
  });
  beforeEach(async () => {
    n += 1;
    if (!fixture.serve) await fixture.startServer();
  });
  afterEach(() => {
    fixture.closeClients();
    for (const dir of mounted.splice(0)) execFileSync('umount', [dir]);
  });
  after(() => fixture.cleanup());

  describe('a .lic file', () => {
    /** The file the real serve checked out, as its Base64 line and as the JSON it encodes. */
    const original = () => {
      const text = readFileSync(fixture.license.licenseFile, 'utf8').trim();
      return { text, json: Buffer.from(text, 'base64').toString('utf8') };
    };
    /** Validates offline from `content` written as a .lic, with an empty cache. */
    const offlineWith = async (content: string | Buffer) => {
      const file = path.join(fixture.work, `bad-${n}.lic`);
      writeFileSync(file, content);
      return fixture.client({ serverAddr: unreachable, offline: { cacheDir: path.join(fixture.work, `lic-cache-${n}`), licenseFile: file } }).validate();
    };
    const refused = async (content: string | Buffer, code: string, message: string) => {
      const result = await offlineWith(content);
      assert.equal(result.valid, false);
      assert.deepEqual(codes(result), ['SERVER_UNREACHABLE', code, 'NO_GRACE_TOKEN']);
      assert.equal(result.failures[1]!.message, message);
    };
    /** The document with one value changed, encoded again as the server would. */
    const tampered = (change: (document: Record<string, any>) => void) => {
      const document = JSON.parse(original().json);
      change(document);
      return `${Buffer.from(JSON.stringify(document)).toString('base64')}\n`;
    };

    it('answers untouched, so each refusal below is the damage\'s', async () => {
      const result = await offlineWith(readFileSync(fixture.license.licenseFile));
      assert.equal(result.source, 'license-file', JSON.stringify(result.failures));
    });

    it('tampered (one value changed) is refused: signature verification failed', async () => {
      await refused(tampered((document) => (document.entitlements.find((e: { code: string }) => e.code === 'seats').usage_limit = 1000)), 'SIGNATURE_INVALID', 'signature verification failed');
      await refused(tampered((document) => (document.valid_until = '2199-01-01T00:00:00Z')), 'SIGNATURE_INVALID', 'signature verification failed');
      await refused(tampered((document) => (document.hardware_id = 'another-machine')), 'SIGNATURE_INVALID', 'signature verification failed');
    });

    it('truncated is refused as malformed', async () => {
      const { text } = original();
      const half = Math.floor(text.length / 2);
      await refused(`${text.slice(0, half | 1)}\n`, 'LICENSE_FILE_MALFORMED', 'license file is malformed: it is not valid Base64 (it may be truncated)');
      await refused(`${text.slice(0, half & ~3)}\n`, 'LICENSE_FILE_MALFORMED', 'license file is malformed: the decoded content is not JSON (it may be truncated)');
      await refused('', 'LICENSE_FILE_MALFORMED', 'license file is malformed: it is empty');
    });

    it('not Base64 is refused as malformed', async () => {
      const notBase64 = 'license file is malformed: it is not valid Base64 (it may be truncated)';
      await refused(original().json, 'LICENSE_FILE_MALFORMED', notBase64);
      await refused('this is not a license\n', 'LICENSE_FILE_MALFORMED', notBase64);
      await refused(gzipSync(readFileSync(fixture.license.licenseFile)), 'LICENSE_FILE_MALFORMED', 'license file is malformed: it holds bytes that are not ASCII');
    });
  });

  describe('a cache directory', () => {
    /**
     * A tmpfs on `dir` for this test. Mounting needs root, as CI has: under CI a machine that
     * cannot mount fails the test, elsewhere it is skipped.
     */
    function mountTmpfs(context: Mocha.Context, dir: string, options: string): void {
      mkdirSync(dir, { recursive: true });
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { stdio: 'pipe' });
      } catch (error) {
        if (process.env.CI === 'true') throw new Error(`cannot mount a small file system for this test: ${String(error)}`);
        console.warn('    (skipping: cannot mount a tmpfs here)');
        context.skip();
      }
      mounted.push(dir);
    }
    const remountReadOnly = (dir: string) => execFileSync('mount', ['-o', 'remount,ro', dir], { stdio: 'pipe' });
    /** Writes a file on `dir`'s file system until it is out of space. */
    const fillToTheBrim = (dir: string) => {
      const fd = openSync(path.join(dir, 'filler'), 'w');
      const chunk = Buffer.alloc(4096);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
      } finally {
        closeSync(fd);
      }
      assert.equal(statfsSync(dir).bavail, 0, 'the file system is full');
    };
    const stateOf = (cacheDir: string, license: FixtureLicense) => new ClientStore(cacheDir, license.key).dir;

    it('that turns read-only keeps the server\'s verdict in memory, and says why it could not write', async function () {
      const license = await fixture.createLicense();
      const cacheDir = path.join(fixture.work, `read-only-${n}`);
      mountTmpfs(this, cacheDir, 'size=1m,mode=0700');
      const c = fixture.client({ offline: { cacheDir } }, license);
      assert.equal((await c.validate()).source, 'online');
      remountReadOnly(cacheDir);

      await fixture.api('POST', `/api/licenses/${license.id}/deactivate`);
      const revoked = await c.validate();
      assert.equal(revoked.reason, 'LICENSE_INACTIVE');
      const state = stateOf(cacheDir, license);
      assert.deepEqual(warnings(revoked), [
        `CACHE_NOT_WRITTEN: cannot write ${state}/clock.json: read-only file system`,
        `CACHE_NOT_WRITTEN: cannot write ${state}/revoked.json: read-only file system`,
        `CACHE_NOT_WRITTEN: cannot remove ${state}/grace.json: read-only file system`,
      ]);
      assert.deepEqual(readdirSync(state).sort(), ['clock.json', 'grace.json'], 'the disk still holds the grace token and no verdict');

      await fixture.stopServer();
      const offline = await c.validate();
      assert.equal(offline.valid, false, 'neither the .lic file nor the grace token on disk revives the license');
      assert.deepEqual(codes(offline), ['SERVER_UNREACHABLE', 'LICENSE_REVOKED', 'LICENSE_REVOKED']);
      assert.match(offline.failures[1]!.message, /LICENSE_INACTIVE/);
      assert.deepEqual(warnings(offline), [`CACHE_NOT_WRITTEN: cannot write ${state}/clock.json: read-only file system`]);
    });

    it('that turns read-only makes release() keep the seat, say why, and send nothing', async function () {
      const license = await fixture.createLicense();
      const cacheDir = path.join(fixture.work, `read-only-release-${n}`);
      mountTmpfs(this, cacheDir, 'size=1m,mode=0700');
      const proxy = await CountingProxy.start(() => fixture.serve!.url);
      try {
        const c = fixture.client({ serverAddr: proxy.addr, offline: { cacheDir } }, license);
        assert.equal((await c.validate()).source, 'online');
        remountReadOnly(cacheDir);
        await assert.rejects(c.release(), (error: unknown) => {
          assert.ok(error instanceof LicenseClientError, String(error));
          assert.equal(error.code, 'CACHE_NOT_WRITTEN');
          assert.match(error.message, /grace\.json: read-only file system/);
          return true;
        });
        assert.equal(proxy.count('/api/v1/release'), 0, 'the server was not told the seat is free');
        assert.ok(readdirSync(stateOf(cacheDir, license)).includes('grace.json'));
      } finally {
        await proxy.close();
      }
    });

    it('read-only from the start keeps the trusted time in memory: a clock set back is still caught', async function () {
      const cacheDir = path.join(fixture.work, `never-writable-${n}`);
      mountTmpfs(this, cacheDir, 'ro,size=1m,mode=0700');
      const clock = new FakeClock();
      const start = clock.now().getTime();
      const c = fixture.client({ clock, offline: { cacheDir } });
      const cannotCreate = `CACHE_NOT_WRITTEN: cannot create the cache directory ${stateOf(cacheDir, fixture.license)}: read-only file system`;
      const online = await c.validate();
      assert.equal(online.source, 'online');
      assert.equal(online.decryptionKey?.length, 32);
      assert.deepEqual(warnings(online), [cannotCreate]);

      await fixture.stopServer();
      clock.set(new Date(start - DAY));
      assert.deepEqual(codes(await c.validate()), ['SERVER_UNREACHABLE', 'CLOCK_ROLLBACK', 'CLOCK_ROLLBACK']);
      clock.set(new Date(start + 10 * 60_000));
      const offline = await c.validate();
      assert.equal(offline.source, 'license-file', JSON.stringify(offline.failures));
      assert.deepEqual(warnings(offline), [cannotCreate]);
    });

    it('on a full disk answers as usual, leaves the old files whole, and keeps a verdict in memory', async function () {
      const license = await fixture.createLicense();
      const cacheDir = path.join(fixture.work, `full-${n}`);
      mountTmpfs(this, cacheDir, 'size=256k,mode=0700');
      const c = fixture.client({ offline: { cacheDir } }, license);
      assert.deepEqual(warnings(await c.validate()), []);
      const state = stateOf(cacheDir, license);
      const clockBefore = readFileSync(path.join(state, 'clock.json'));
      fillToTheBrim(cacheDir);

      const online = await c.validate();
      assert.equal(online.source, 'online');
      assert.equal(online.decryptionKey?.length, 32);
      assert.deepEqual(warnings(online), [`CACHE_NOT_WRITTEN: cannot write ${state}/clock.json: no space left on the device`]);
      assert.deepEqual(readFileSync(path.join(state, 'clock.json')), clockBefore, 'written whole or not at all');
      assert.deepEqual(readdirSync(state).filter((name) => name.endsWith('.partial')), []);

      await fixture.api('POST', `/api/licenses/${license.id}/deactivate`);
      const revoked = await c.validate();
      assert.equal(revoked.reason, 'LICENSE_INACTIVE');
      assert.deepEqual(warnings(revoked), [
        `CACHE_NOT_WRITTEN: cannot write ${state}/clock.json: no space left on the device`,
        `CACHE_NOT_WRITTEN: cannot write ${state}/revoked.json: no space left on the device`,
      ]);
      await fixture.stopServer();
      assert.deepEqual(codes(await c.validate()), ['SERVER_UNREACHABLE', 'LICENSE_REVOKED', 'LICENSE_REVOKED']);
    });

    it('on a disk full from the start (no block, no inode left) answers online and offline, and a usage report says why it is not queued', async function () {
      const cacheDir = path.join(fixture.work, `full-from-start-${n}`);
      mountTmpfs(this, cacheDir, 'size=64k,nr_inodes=2,mode=0700');
      fillToTheBrim(cacheDir);
      assert.equal(statfsSync(cacheDir).ffree, 0, 'no inode left either');
      const state = stateOf(cacheDir, fixture.license);
      const noSpace = `cannot create the cache directory ${state}: no space left on the device`;
      const c = fixture.client({ offline: { cacheDir } });
      const online = await c.validate();
      assert.equal(online.source, 'online');
      assert.deepEqual(warnings(online), [`CACHE_NOT_WRITTEN: ${noSpace}`]);

      await fixture.stopServer();
      const offline = await c.validate();
      assert.equal(offline.source, 'license-file', JSON.stringify(offline.failures));
      assert.deepEqual(warnings(offline), [`CACHE_NOT_WRITTEN: ${noSpace}`]);
      await assert.rejects(c.reportUsage('seats', 1), {
        code: 'CACHE_NOT_WRITTEN',
        message: `the report could not be queued: cannot create the cache directory ${state}/queue: no space left on the device`,
      });
    });
  });
});
