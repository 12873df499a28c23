import assert from 'node:assert/strict';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { renewLicense } from '../../../src/lib/licensing/license-changes.js';
import { createLicense, setLicenseActive, type License } from '../../../src/lib/licensing/licenses.js';
import { scanLicenseDeadlines } from '../../../src/lib/notifications/license-clock.js';
import { LicenseClockScheduler } from '../../../src/lib/notifications/license-clock-scheduler.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import { forEachEngine } from '../../support/engines.js';
import { FakeClock } from '../../support/fake-clock.js';
import { deliveries, everyEventToWebhook } from '../../support/outbox-rows.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const WINDOWS = [30, 7, 1];

forEachEngine('license.expiring_soon and license.expired on a fake clock (issue 25)', (fixture) => {
  let db: Database;
  let url: string;
  let customerId: string;
  let time: number;
  const clock = () => new Date(time);
  const operator: OperationContext = { actor: 'cli:operator', clock };
  const scan = (database: Database = db, batchSize?: number) => scanLicenseDeadlines(database, { now: clock(), windows: WINDOWS, ...(batchSize ? { batchSize } : {}) });
  /** A license ending `days` after now; made on a clock that far back when it ends in the past. */
  const endingIn = async (days: number, extra: Partial<Parameters<typeof createLicense>[1]> = {}): Promise<License> => {
    const end = time + days * DAY;
    const madeAt = Math.min(time, end - DAY);
    return createLicense(db, { customerId, type: 'time_based', validFrom: new Date(madeAt), validUntil: new Date(end), ...extra }, { actor: 'cli:operator', clock: () => new Date(madeAt) });
  };
  const events = async (license: License, event = 'license.expiring_soon') =>
    (await deliveries(db, event)).filter((row) => row.data.license_id === license.id).map((row) => row.data);
  const windowsOf = async (license: License) => (await events(license)).map((data) => data.window_days);

  beforeEach(async () => {
    time = Date.parse('2026-11-23T10:00:00.000Z');
    url = await fixture.freshUrl();
    db = await openDatabase(url);
    customerId = (await createCustomer(db, { name: 'Initech', email: 'billing@initech.example' }, operator)).id;
    await everyEventToWebhook(db, ['license.expiring_soon']);
  });
  afterEach(async () => db?.close());

  it('reads and marks nothing while no rule wants the events, and starts at the current window when one is added', async () => {
    await replaceNotificationSettings(db, { rules: [{ event: 'backup.*', email: 'ops@initech.example' }] }, operator);
    const license = await endingIn(5);
    await endingIn(-0.5);
    assert.deepEqual(await scan(), { raised: 0 });
    assert.deepEqual(await db.query('SELECT key FROM notification_marks'), [], 'no marks: nothing was scanned');
    await everyEventToWebhook(db, ['license.expiring_soon']);
    assert.deepEqual(await scan(), { raised: 2 });
    assert.deepEqual((await events(license)).map((entry) => entry.window_days), [7], 'the window the license is in, not the 30-day one first');
  });

  it('fires once per window as the end comes near (30, 7, 1 days), then license.expired once', async () => {
    const license = await endingIn(40);
    assert.deepEqual(await scan(), { raised: 0 });
    time += 10 * DAY + MINUTE;
    assert.deepEqual(await scan(), { raised: 1 });
    assert.deepEqual(await scan(), { raised: 0 }, 'a second scan at once raises nothing');
    time += 5 * DAY;
    await scan();
    assert.deepEqual(await windowsOf(license), [30]);
    time = Date.parse(license.valid_until) - 7 * DAY;
    await scan();
    time += 3 * DAY;
    await scan();
    time = Date.parse(license.valid_until) - 12 * HOUR;
    await scan();
    await scan();
    const data = await events(license);
    assert.deepEqual(data.map((entry) => [entry.window_days, entry.days_left]), [[30, 30], [7, 7], [1, 1]]);
    assert.deepEqual(Object.keys(data[0]!).sort(), ['customer_id', 'customer_name', 'days_left', 'license_id', 'license_key_prefix', 'valid_until', 'window_days']);
    assert.equal(data[0]!.valid_until, license.valid_until);
    // email: customer resolves the customer's contact address.
    const emails = (await deliveries(db, 'license.expiring_soon', 'email')).filter((row) => row.data.license_id === license.id);
    assert.deepEqual(emails.map((row) => row.target), ['billing@initech.example', 'billing@initech.example', 'billing@initech.example']);

    assert.deepEqual(await events(license, 'license.expired'), []);
    time = Date.parse(license.valid_until);
    await scan();
    time += HOUR;
    await scan();
    const expired = await events(license, 'license.expired');
    assert.equal(expired.length, 1);
    assert.deepEqual(Object.keys(expired[0]!).sort(), ['customer_id', 'customer_name', 'license_id', 'license_key_prefix', 'valid_until']);
    assert.equal((await events(license)).length, 3, 'no reminder once it has ended');
  });

  it('a renewal starts the windows over for the new end', async () => {
    const license = await endingIn(5);
    await scan();
    assert.deepEqual(await windowsOf(license), [7]);
    const renewed = (await renewLicense(db, license.id, { by: '60d' }, operator)).license;
    await scan();
    assert.deepEqual(await windowsOf(license), [7], '65 days out: in no window');
    time = Date.parse(renewed.valid_until) - 20 * DAY;
    await scan();
    time = Date.parse(renewed.valid_until) - 6 * DAY;
    await scan();
    const data = await events(license);
    assert.deepEqual(data.map((entry) => [entry.window_days, entry.valid_until]), [
      [7, license.valid_until],
      [30, renewed.valid_until],
      [7, renewed.valid_until],
    ]);
  });

  it('after downtime: one event for the smallest window the license is in, the skipped ones marked, not a burst', async () => {
    const license = await endingIn(40);
    time = Date.parse(license.valid_until) - 2 * DAY;
    assert.deepEqual(await scan(), { raised: 1 });
    const data = await events(license);
    assert.deepEqual(data.map((entry) => [entry.window_days, entry.days_left]), [[7, 2]]);
    const marks = await db.query('SELECT key, count FROM notification_marks WHERE key LIKE ? ORDER BY key', [`license.expiring_soon:${license.id}:%`]);
    assert.deepEqual(marks.map((mark) => [String(mark.key).split(':').at(-1), Number(mark.count)]), [['30', 0], ['7', 1]]);
    time += 1 * DAY + HOUR;
    await scan();
    assert.deepEqual(await windowsOf(license), [7, 1]);
  });

  it('license.expired catches up for licenses ended within the largest window only; an old store floods nothing', async () => {
    const longAgo = await endingIn(-365);
    const recently = await endingIn(-3);
    const justBeyond = await endingIn(-30.5);
    assert.deepEqual(await scan(), { raised: 1 });
    assert.equal((await events(recently, 'license.expired')).length, 1);
    assert.equal((await events(longAgo, 'license.expired')).length, 0);
    assert.equal((await events(justBeyond, 'license.expired')).length, 0);
    assert.equal((await events(recently)).length, 0, 'an ended license gets no reminder');
  });

  it('only active licenses of active customers; many licenses read in batches, each raised once', async () => {
    const licenses = await Promise.all(Array.from({ length: 7 }, (_, i) => endingIn(3 + i / 10)));
    const off = await endingIn(3);
    await setLicenseActive(db, off.id, false, operator);
    assert.deepEqual(await scan(db, 2), { raised: 7 });
    assert.deepEqual(await scan(db, 2), { raised: 0 });
    for (const license of licenses) assert.deepEqual(await windowsOf(license), [7]);
    assert.deepEqual(await windowsOf(off), []);
  });

  it('two scans at once on two connections raise each event once', async function () {
    this.timeout(30_000);
    const licenses = await Promise.all(Array.from({ length: 30 }, (_, i) => endingIn(i % 2 === 0 ? 2 : -2)));
    const other = await openDatabase(url);
    try {
      const [a, b] = await Promise.all([scan(db, 4), scan(other, 4)]);
      assert.equal(a.raised + b.raised, 30);
    } finally {
      await other.close();
    }
    for (const [i, license] of licenses.entries()) {
      assert.equal((await events(license, i % 2 === 0 ? 'license.expiring_soon' : 'license.expired')).length, 1);
    }
  });

  describe('the scheduler', () => {
    const schedulerOn = (database: Database, fake: FakeClock, log?: (entry: Record<string, unknown>) => void) =>
      new LicenseClockScheduler({ database: () => database, clock: fake, windows: () => WINDOWS, intervalMinutes: 15, ...(log ? { log } : {}) });

    it('two daemons on one database: each round runs on one of them, each event once, across windows and downtime', async function () {
      this.timeout(60_000);
      const fake = new FakeClock(time);
      const license = await endingIn(40);
      const other = await openDatabase(url);
      const a = schedulerOn(db, fake);
      const b = schedulerOn(other, fake);
      try {
        const [first, second] = await Promise.all([a.start(), b.start()]);
        assert.deepEqual([first?.ran, second?.ran].sort(), [false, true], 'the catch-up round ran once');
        // Eleven days in 15-minute rounds: each daemon's timer fires every round, one of them scans.
        for (let round = 0; round < 11 * 24 * 4; round += 1) {
          fake.advance(15 * MINUTE);
          await Promise.all([a.idle(), b.idle()]);
        }
        assert.deepEqual(await windowsOf(license), [30]);
        // Both down for a month: the first round after sees the license ended.
        a.stop();
        b.stop();
        fake.set(new Date(Date.parse(license.valid_until) + 2 * DAY));
        const c = schedulerOn(db, fake);
        const d = schedulerOn(other, fake);
        await Promise.all([c.start(), d.start()]);
        c.stop();
        d.stop();
        assert.deepEqual(await windowsOf(license), [30], 'no late reminders after the end');
        assert.equal((await events(license, 'license.expired')).length, 1);
        const claims = await db.query("SELECT count(*) AS n FROM notification_marks WHERE key LIKE 'scan:%'");
        assert.equal(Number(claims[0]!.n), 1 + 11 * 24 * 4 + 1);
      } finally {
        a.stop();
        b.stop();
        await other.close();
      }
    });

    it('a round that fails is logged and the schedule goes on', async () => {
      const fake = new FakeClock(time);
      const logged: Array<Record<string, unknown>> = [];
      let broken = true;
      const scheduler = new LicenseClockScheduler({
        database: () => (broken ? ({ transaction: () => Promise.reject(new Error('database unreachable')) } as unknown as Database) : db),
        clock: fake,
        windows: () => WINDOWS,
        log: (entry) => logged.push(entry),
      });
      const license = await endingIn(3);
      assert.equal(await scheduler.start(), undefined);
      assert.match(String(logged[0]?.error), /database unreachable/);
      broken = false;
      fake.advance(15 * MINUTE);
      await scheduler.idle();
      scheduler.stop();
      assert.deepEqual(await windowsOf(license), [7]);
      assert.deepEqual(fake.pending(), [], 'stopped: no timer left');
    });
  });
});
