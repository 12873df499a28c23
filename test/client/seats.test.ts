import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { eventually, FakeClock } from '../support/fake-clock.js';
import { forEachEngine } from '../support/engines.js';
import { CountingProxy, LicenseFixture, type FixtureLicense } from '../support/license-fixture.js';

const MINUTE = 60_000;

/** The client library and the seats of a license: refusals that purge, release(), lease renewal. */
forEachEngine('the client library and machine seats, against a real serve process', (engine) => {
  let fixture: LicenseFixture;

  before(async function () {
    this.timeout(60_000);
    fixture = await LicenseFixture.start({}, await engine.freshUrl());
  });
  afterEach(() => fixture.closeClients());
  after(() => fixture.cleanup());

  const floatingLicense = async (): Promise<FixtureLicense> => {
    const license = (await fixture.api('POST', '/api/licenses', {
      customer_id: fixture.customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: 1, floating: true, lease_hours: 1,
    })).body;
    return { id: license.id, key: license.key, licenseFile: path.join(fixture.work, 'none.lic') };
  };
  const graceFiles = (dir: string) => readdirSync(path.join(fixture.work, dir), { recursive: true }).map(String).filter((name) => name.endsWith('grace.json'));
  const withDatabase = async <T>(work: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>): Promise<T> => {
    const db = await openDatabase(fixture.databaseUrl);
    try {
      return await work(db);
    } finally {
      await db.close();
    }
  };

  it('takes MACHINE_LIMIT_EXCEEDED as final: the cached grace token is purged and the offline tiers refuse', async () => {
    const license = await floatingLicense();
    const b = fixture.client({ hardwareId: 'seat-b', offline: { cacheDir: path.join(fixture.work, 'cache-b') } }, license);
    assert.equal((await b.validate()).valid, true);
    assert.equal(graceFiles('cache-b').length, 1);
    // B's lease runs out (as after an hour without validating), and A takes the only seat.
    await withDatabase((db) => db.execute('UPDATE machines SET lease_expires_at = ? WHERE license_id = ?', [new Date(Date.now() - 1000).toISOString(), license.id]));
    assert.equal((await fixture.client({ hardwareId: 'seat-a' }, license).validate()).valid, true);
    const refused = await b.validate();
    assert.equal(refused.valid, false);
    assert.equal(refused.isOffline, false);
    assert.equal(refused.reason, 'MACHINE_LIMIT_EXCEEDED');
    assert.equal(graceFiles('cache-b').length, 0, 'grace token purged');
    await fixture.stopServer();
    try {
      const offline = await b.validate();
      assert.equal(offline.valid, false, 'no offline tier vouches for a machine the server refused');
    } finally {
      await fixture.startServer();
    }
  });

  it('release() gives up the lease and deletes its grace token; the seat is free when that token would have ended', async () => {
    const license = await floatingLicense();
    const a = fixture.client({ hardwareId: 'release-a', offline: { cacheDir: path.join(fixture.work, 'cache-release-a') } }, license);
    const b = fixture.client({ hardwareId: 'release-b', offline: { cacheDir: path.join(fixture.work, 'cache-release-b') } }, license);
    assert.equal((await a.validate()).valid, true);
    assert.equal((await b.validate()).reason, 'MACHINE_LIMIT_EXCEEDED');
    assert.equal(graceFiles('cache-release-a').length, 1);
    const leaseEnd = await withDatabase(async (db) => String((await db.query('SELECT lease_expires_at FROM machines WHERE license_id = ? AND hardware_id = ?', [license.id, 'release-a']))[0]!.lease_expires_at));
    const seatFreeAt = new Date(leaseEnd).toISOString();
    assert.deepEqual(await a.release(), { released: true, seatFreeAt, message: `the seat is free at ${seatFreeAt}, when the grace token given to this machine ends` });
    assert.equal(graceFiles('cache-release-a').length, 0, 'the grace token of the released seat is gone');
    assert.equal((await b.validate()).reason, 'MACHINE_LIMIT_EXCEEDED', 'a copy of the token would work until it ends: the seat is not given away');
    // The hour of the lease passes.
    await withDatabase((db) => db.execute('UPDATE machines SET lease_expires_at = ? WHERE license_id = ?', [new Date(Date.now() - 1000).toISOString(), license.id]));
    assert.equal((await b.validate()).valid, true, 'the seat went to the other machine');
    assert.deepEqual(await a.release(), { released: false, seatFreeAt: null, message: 'this machine held no lease' });
    await fixture.stopServer();
    try {
      await assert.rejects(a.release(), (error: Error & { code?: string }) => error.code === 'SERVER_UNREACHABLE');
    } finally {
      await fixture.startServer();
    }
  });

  it('keeps a queued report the server does not count for want of a seat, and sends it once the machine holds one again', async () => {
    const license = (await fixture.api('POST', '/api/licenses', {
      customer_id: fixture.customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: 1, floating: true, lease_hours: 1,
      entitlements: [{ code: 'seats', usage_limit: 100 }],
    })).body;
    const target = { id: license.id, key: license.key, licenseFile: path.join(fixture.work, 'none.lic') };
    const cacheDir = path.join(fixture.work, 'cache-queue-a');
    const a = fixture.client({ hardwareId: 'queue-a', offline: { cacheDir } }, target);
    assert.equal((await a.validate()).valid, true);
    await fixture.stopServer();
    try {
      assert.equal((await a.validate()).source, 'grace-token', 'offline, on its grace token');
      assert.deepEqual(await a.reportUsage('seats', 3), { accepted: false, queued: true });
    } finally {
      await fixture.startServer();
    }
    const queueDir = path.join(cacheDir, readdirSync(cacheDir)[0]!, 'queue');
    const rejectedDir = path.join(cacheDir, readdirSync(cacheDir)[0]!, 'rejected');
    const used = async () => (await fixture.api('GET', `/api/licenses/${license.id}`)).body.entitlements[0].used;
    const endLeases = () => withDatabase((db) => db.execute('UPDATE machines SET lease_expires_at = ? WHERE license_id = ?', [new Date(Date.now() - 1000).toISOString(), license.id]));
    // While it was away its lease ran out and another machine took the seat.
    await endLeases();
    assert.equal((await fixture.client({ hardwareId: 'queue-b' }, target).validate()).valid, true);
    // Back online: the answer is a refusal, and leaving offline mode sends the queue (awaited).
    const refused = await a.validate();
    assert.deepEqual([refused.reason, refused.isOffline], ['MACHINE_LIMIT_EXCEEDED', false]);
    assert.equal(readdirSync(queueDir).length, 1, 'kept in the queue: SEAT_REQUIRED is not a refusal for good');
    assert.ok(!existsSync(rejectedDir) || readdirSync(rejectedDir).length === 0);
    assert.equal(await used(), 0);
    await assert.rejects(a.reportUsage('seats', 1), (error: Error & { code?: string }) => error.code === 'SEAT_REQUIRED');
    // The other machine's lease runs out too: this one takes the seat back, and its report counts.
    await endLeases();
    assert.equal((await a.validate()).valid, true);
    await eventually(() => readdirSync(queueDir).length === 0, 'the queue is sent');
    assert.equal(await used(), 3);
  });

  it('renews a floating lease halfway through it, as part of its own schedule', async () => {
    const license = await floatingLicense();
    const proxy = await CountingProxy.start(() => `http://${fixture.addr}`);
    try {
      const clock = new FakeClock();
      const client = fixture.client({ hardwareId: 'renewing', serverAddr: proxy.addr, clock }, license);
      assert.equal((await client.validate()).valid, true);
      assert.equal(proxy.count('/api/v1/validate'), 1);
      clock.advance(29 * MINUTE);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(proxy.count('/api/v1/validate'), 1, 'not before half the lease');
      clock.advance(2 * MINUTE);
      await eventually(() => proxy.count('/api/v1/validate') === 2, 'a renewal at half the lease');
      // The proxy counts the request as it arrives; the client sets its next renewal only
      // when the answer is in, and time must not move before that (on a slow machine it did).
      await eventually(() => clock.pending().some((ms) => ms >= 10 * MINUTE), 'the next renewal is scheduled');
      clock.advance(31 * MINUTE);
      await eventually(() => proxy.count('/api/v1/validate') === 3, 'and again after that');
      client.close();
      clock.advance(120 * MINUTE);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(proxy.count('/api/v1/validate'), 3, 'a closed client renews nothing');
    } finally {
      await proxy.close();
    }
    assert.ok(!existsSync(path.join(fixture.work, 'none.lic')));
  });
});
