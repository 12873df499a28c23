import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import path from 'node:path';
import { LicenseClient, LicenseClientConfigError } from '../../src/client/index.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { eventually, FakeClock } from '../support/fake-clock.js';
import { freePort, LicenseFixture, type ClientOverrides, type FixtureLicense } from '../support/license-fixture.js';

const HOUR = 3_600_000;

describe('the client library against a real serve process', function () {
  this.timeout(60_000);
  let fixture: LicenseFixture;
  let work: string;
  let license: FixtureLicense;
  let licenseFile: string;
  let pem: string;
  let decryptionKey: string;

  const startServer = () => fixture.startServer();
  const stopServer = () => fixture.stopServer();
  const client = (overrides: ClientOverrides = {}) => fixture.client(overrides);
  const usage = async () => {
    const db = await openDatabase(fixture.databaseUrl);
    try {
      const [row] = await db.query<{ used: number }>(
        `SELECT le.used FROM license_entitlements le JOIN entitlements e ON e.id = le.entitlement_id WHERE le.license_id = ? AND e.code = 'seats'`,
        [license.id],
      );
      const [records] = await db.query<{ n: number }>('SELECT count(*) AS n FROM usage_records WHERE license_id = ?', [license.id]);
      return { used: Number(row!.used), records: Number(records!.n) };
    } finally {
      await db.close();
    }
  };

  before(async () => {
    fixture = await LicenseFixture.start();
    ({ work, license, pem } = fixture);
    licenseFile = license.licenseFile;
    const db = await openDatabase(fixture.databaseUrl);
    try {
      const [row] = await db.query<{ decryption_key: Buffer }>('SELECT decryption_key FROM licenses WHERE id = ?', [license.id]);
      decryptionKey = Buffer.from(row!.decryption_key).toString('hex');
    } finally {
      await db.close();
    }
  });
  afterEach(() => fixture.closeClients());
  after(() => fixture.cleanup());

  it('validates online: valid, not offline, the decryption key unsealed, entitlements, a cached grace token', async () => {
    const result = await client().validate();
    assert.equal(result.valid, true);
    assert.equal(result.isOffline, false);
    assert.equal(result.source, 'online');
    assert.equal(Buffer.from(result.decryptionKey!).toString('hex'), decryptionKey);
    assert.equal(result.hasEntitlement('seats'), true);
    assert.equal(result.hasEntitlement('export'), true, 'restricted only while offline');
    assert.equal(result.hasEntitlement('other'), false);
    const dir = path.join(work, 'cache', readdirSync(path.join(work, 'cache'))[0]!);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(path.join(dir, 'grace.json')).mode & 0o777, 0o600);
  });

  it('falls back to the .lic file when the server is stopped, entering offline mode once', async () => {
    const entered: number[] = [];
    const c = client({ onOfflineModeEnter: (remaining) => entered.push(remaining) });
    assert.equal((await c.validate()).valid, true);
    await stopServer();
    const result = await c.validate();
    assert.equal(result.valid, true);
    assert.equal(result.isOffline, true);
    assert.equal(result.source, 'license-file');
    assert.equal(Buffer.from(result.decryptionKey!).toString('hex'), decryptionKey, 'unsealed from encrypted_key in the file');
    assert.equal(result.hasEntitlement('seats'), true);
    assert.equal(result.hasEntitlement('export'), false, 'restricted while offline');
    await c.validate();
    assert.equal(entered.length, 1);
    assert.ok(entered[0]! > 71 * HOUR && entered[0]! <= 72 * HOUR, `remaining grace ${entered[0]}`);
  });

  it('without a .lic, uses the cached grace token; when it runs out, fires onGracePeriodExpired once', async () => {
    const clock = new FakeClock();
    let expired = 0;
    const c = client({ clock, offline: { licenseFile: path.join(work, 'missing.lic') }, onGracePeriodExpired: () => (expired += 1) });
    const result = await c.validate();
    assert.equal(result.valid, true);
    assert.equal(result.source, 'grace-token');
    assert.equal(result.isOffline, true);
    assert.equal(result.hasEntitlement('seats'), true);
    assert.deepEqual(result.failures, []);
    clock.advance(73 * HOUR);
    await eventually(() => expired === 1, 'the grace period expired');
    const after = await c.validate();
    assert.equal(after.valid, false);
    assert.deepEqual(after.failures.map((f) => f.code), ['SERVER_UNREACHABLE', 'LICENSE_FILE_UNREADABLE', 'GRACE_TOKEN_EXPIRED']);
    await c.validate();
    assert.equal(expired, 1, 'fired once');
  });

  it('retries with exponential backoff, gives up after maxRetryAttempts, and close() stops every timer', async () => {
    const clock = new FakeClock();
    const c = client({ clock, serverAddr: `127.0.0.1:${await freePort()}`, offline: { retryInterval: 30_000, maxRetryInterval: 300_000, maxRetryAttempts: 7 } });
    await c.validate();
    const delays: number[] = [];
    for (let i = 0; i < 8; i += 1) {
      const [next] = clock.pending().filter((ms) => ms >= 30_000);
      if (next === undefined) break;
      delays.push(next);
      clock.advance(next);
      await eventually(() => clock.pending().some((ms) => ms >= 30_000) || delays.length === 7, 'the next retry is scheduled');
    }
    assert.deepEqual(delays, [30_000, 60_000, 120_000, 240_000, 300_000, 300_000, 300_000]);
    c.close();
    assert.deepEqual(clock.pending(), []);
  });

  it('queues usage while offline, survives a restart, and flushes it exactly once when the server is back', async () => {
    const clock = new FakeClock();
    let exits = 0;
    const first = client({ clock });
    const reported = await first.reportUsage('seats', 3);
    assert.deepEqual(reported, { accepted: false, queued: true });
    first.close();
    // A new process: the queue is on disk.
    const second = client({ clock, onOfflineModeExit: () => (exits += 1) });
    assert.equal((await second.validate()).isOffline, true);
    await second.reportUsage('seats', 2);
    const queueDir = path.join(work, 'cache', readdirSync(path.join(work, 'cache'))[0]!, 'queue');
    assert.equal(readdirSync(queueDir).length, 2);
    const before = await usage();
    await startServer();
    clock.advance(30_000);
    await eventually(() => exits === 1, 'the client is back online');
    await eventually(() => readdirSync(queueDir).length === 0, 'the queue is flushed');
    const after = await usage();
    assert.equal(after.used - before.used, 5);
    assert.equal(after.records - before.records, 2);
    assert.equal(second.isOffline, false);
    const online = await second.reportUsage('seats', 1);
    assert.equal(online.accepted, true);
    assert.equal(online.remaining, 100 - after.used - 1);
  });

  it('counts a report once even when it is sent again after a crash between send and dequeue', async () => {
    const c = client();
    await stopServer();
    await c.validate();
    await c.reportUsage('seats', 4);
    const queueDir = path.join(work, 'cache', readdirSync(path.join(work, 'cache'))[0]!, 'queue');
    const [name] = readdirSync(queueDir);
    const saved = readFileSync(path.join(queueDir, name!));
    const before = await usage();
    await startServer();
    assert.equal((await c.validate()).isOffline, false);
    await eventually(() => readdirSync(queueDir).length === 0, 'flushed');
    writeFileSync(path.join(queueDir, name!), saved);
    await c.validate();
    await eventually(() => readdirSync(queueDir).length === 0, 'flushed again');
    const after = await usage();
    assert.equal(after.used - before.used, 4, 'counted once');
  });

  it('treats the server\'s "invalid" as final: the grace token is deleted, the offline tiers refuse the license', async () => {
    const c = client({ offline: { licenseFile: path.join(work, 'missing.lic') } });
    assert.equal((await c.validate()).valid, true);
    const graceFile = path.join(work, 'cache', readdirSync(path.join(work, 'cache'))[0]!, 'grace.json');
    assert.ok(existsSync(graceFile));
    await fixture.api('POST', `/api/licenses/${license.id}/deactivate`);
    const result = await c.validate();
    assert.equal(result.valid, false);
    assert.equal(result.isOffline, false);
    assert.equal(result.reason, 'LICENSE_INACTIVE');
    assert.ok(!existsSync(graceFile), 'the grace token is gone');
    await stopServer();
    const offline = await c.validate();
    assert.equal(offline.valid, false, 'a revoked license does not live on in a grace token');
    assert.deepEqual(offline.failures.map((f) => f.code), ['SERVER_UNREACHABLE', 'LICENSE_REVOKED', 'LICENSE_REVOKED']);
    await startServer();
    await fixture.api('POST', `/api/licenses/${license.id}/activate`);
  });

  it('refuses offline validation when the clock has been set back', async () => {
    const clock = new FakeClock();
    const c = client({ clock });
    assert.equal((await c.validate()).valid, true);
    await stopServer();
    clock.set(new Date(Date.now() - 24 * HOUR));
    const result = await c.validate();
    assert.equal(result.valid, false);
    assert.deepEqual(result.failures.map((f) => f.code), ['SERVER_UNREACHABLE', 'CLOCK_ROLLBACK', 'CLOCK_ROLLBACK']);
    assert.match(result.failures[1]!.message, /set back/);
    clock.set(new Date(Date.now() - 60_000));
    const drifted = await c.validate();
    assert.equal(drifted.valid, true, `a minute of drift is tolerated: ${JSON.stringify(drifted.failures)}`);
    await startServer();
  });

  it('ends every bad situation in a reason, never an exception or a hang', async () => {
    const cacheDir = path.join(work, 'bad-cache');
    // A cache file that is not JSON counts as absent.
    const probe = client({ offline: { cacheDir } });
    await probe.validate();
    const dir = path.join(cacheDir, readdirSync(cacheDir)[0]!);
    writeFileSync(path.join(dir, 'grace.json'), '{"token": "eyJ');
    await stopServer();
    const corrupt = await client({ offline: { cacheDir, licenseFile: path.join(work, 'missing.lic') } }).validate();
    assert.deepEqual(corrupt.failures.map((f) => f.code), ['SERVER_UNREACHABLE', 'LICENSE_FILE_UNREADABLE', 'NO_GRACE_TOKEN']);

    // A grace token with a changed claim, and one signed by another key.
    await startServer();
    await client({ offline: { cacheDir } }).validate();
    await stopServer();
    const cached = JSON.parse(readFileSync(path.join(dir, 'grace.json'), 'utf8'));
    const [h, c, s] = cached.token.split('.');
    const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
    writeFileSync(path.join(dir, 'grace.json'), JSON.stringify({ ...cached, token: `${h}.${Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 1e6 })).toString('base64url')}.${s}` }));
    const changed = await client({ offline: { cacheDir, licenseFile: path.join(work, 'missing.lic') } }).validate();
    assert.equal(changed.reason, 'GRACE_TOKEN_INVALID');
    const otherKey = '-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEY-----\n';
    const wrongKey = await client({ offline: { cacheDir, licenseFile, publicKey: otherKey } }).validate();
    assert.deepEqual(wrongKey.failures.map((f) => f.code), ['SERVER_UNREACHABLE', 'SIGNATURE_INVALID', 'GRACE_TOKEN_INVALID']);

    // A .lic for another license key, and a .lic bound to another machine.
    const elsewhere = await client({ licenseKey: 'ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ', offline: { cacheDir: path.join(work, 'c2') } }).validate();
    assert.equal(elsewhere.failures[1]!.code, 'LICENSE_FILE_MISMATCH');
    const otherMachine = await client({ hardwareId: 'other-machine', offline: { cacheDir: path.join(work, 'c3') } }).validate();
    assert.equal(otherMachine.failures[1]!.code, 'HARDWARE_MISMATCH');
    assert.match(otherMachine.failures[1]!.message, /hardware ID mismatch: failed to decrypt license key/);

    // A server that answers garbage, and one that never answers.
    const garbage = createHttpServer((_, res) => res.end('<html>maintenance</html>')).listen(0, '127.0.0.1');
    const hang = createServer(() => undefined).listen(0, '127.0.0.1');
    await new Promise((resolve) => setTimeout(resolve, 50));
    try {
      for (const [server, pattern] of [[garbage, /not JSON/], [hang, /no answer within 300 ms/]] as const) {
        const started = Date.now();
        const result = await client({ serverAddr: `127.0.0.1:${(server.address() as AddressInfo).port}`, requestTimeout: 300 }).validate();
        assert.equal(result.valid, true, 'falls back to the .lic file');
        assert.equal(result.isOffline, true);
        assert.ok(Date.now() - started < 3000);
        const online = await client({ serverAddr: `127.0.0.1:${(server.address() as AddressInfo).port}`, requestTimeout: 300, offline: { enabled: false } }).validate();
        assert.equal(online.valid, false);
        assert.match(online.failures[0]!.message, pattern);
      }
    } finally {
      garbage.close();
      hang.close();
    }
    await startServer();
  });

  it('refuses a misconfiguration at construction with the spec\'s messages', () => {
    const base = { serverAddr: '127.0.0.1:1', licenseKey: 'K', version: '1' };
    assert.throws(() => new LicenseClient({ ...base, offline: { enabled: true, publicKey: pem } }), (e: unknown) => e instanceof LicenseClientConfigError && e.message === 'license file path is required');
    assert.throws(() => new LicenseClient({ ...base, offline: { enabled: true, licenseFile: 'x.lic' } }), /^LicenseClientConfigError: public key is required$/);
    assert.throws(() => new LicenseClient({ ...base, serverAddr: 'http://x' }), /<host>:<port>/);
    assert.throws(() => new LicenseClient({ ...base, offline: { enabled: true, licenseFile: 'x', publicKey: 'nope' } }), /public key must be/);
    const configError = (message: RegExp) => (e: unknown) => e instanceof LicenseClientConfigError && message.test(e.message);
    assert.throws(() => new LicenseClient({ ...base, hardwareId: '' }), configError(/^hardwareId must not be empty$/));
    assert.throws(() => new LicenseClient({ ...base, hardwareId: 'x'.repeat(257) }), configError(/^hardwareId must be at most 256 bytes/));
    assert.throws(() => new LicenseClient({ ...base, hardwareId: 'a\nb' }), configError(/^hardwareId must not contain control characters$/));
    assert.throws(() => new LicenseClient(undefined as never), configError(/options must be an object/));
    assert.throws(() => new LicenseClient({ ...base, offline: { cacheDir: 42 as never } }), configError(/cacheDir must be a directory path/));
    assert.throws(() => new LicenseClient({ ...base, offline: { restrictedEntitlements: 'export' as never } }), configError(/restrictedEntitlements/));
    assert.throws(() => new LicenseClient({ ...base, onGracePeriodExpired: 'shutdown' as never }), configError(/onGracePeriodExpired must be a function/));
  });
});
