import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { retryDelayMs, type DelivererOptions, type DeliveryOutcome } from '../../../src/lib/notifications/deliverer.js';
import { NO_CUSTOMER_EMAIL, raiseEvent } from '../../../src/lib/notifications/outbox.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { createLicense } from '../../../src/lib/licensing/licenses.js';
import { forEachEngine } from '../../support/engines.js';
import { testDeliverer } from '../../support/outbox-rows.js';
import { startReceiver } from '../../support/receiver.js';

const HOUR = 3_600_000;

forEachEngine('the notification outbox', (fixture) => {
  let db: Database;
  let url: string;
  const context = { actor: 'test' };

  before(async () => {
    url = await fixture.freshUrl();
    db = await openDatabase(url);
  });
  after(() => db.close());
  beforeEach(() => db.execute('DELETE FROM notification_deliveries'));

  const hooked = (receiverUrl: string, more: { rules?: unknown[] } = {}) =>
    replaceNotificationSettings(db, {
      webhooks: [{ name: 'ops', url: receiverUrl, secret: 'outbox-secret-0123456789' }],
      rules: more.rules ?? [{ event: '*', webhook: 'ops' }],
    }, context);

  const deliverer = (clock: () => Date, more: Partial<DelivererOptions> = {}) => testDeliverer(db, { clock, webhookTimeoutMs: 2000, ...more });

  const rows = () => db.query('SELECT id, status, attempts, channel, target, last_error, next_attempt_at FROM notification_deliveries ORDER BY created_at, id');

  it('writes deliveries in the transaction of the change: a change rolled back leaves none, one committed leaves one per target', async () => {
    await replaceNotificationSettings(db, {
      webhooks: [{ name: 'ops', url: 'http://127.0.0.1:9/hook', secret: 'outbox-secret-0123456789' }, { name: 'off', url: 'http://127.0.0.1:9/off', secret: 'outbox-secret-0123456789', enabled: false }],
      rules: [{ event: 'backup.*', webhook: 'ops' }, { event: 'backup.failed', webhook: 'ops' }, { event: '*', webhook: 'off' }, { event: 'backup.failed', email: 'ops@example.com' }, { event: 'backup.*', email: 'OPS@example.com' }],
    }, context);
    await assert.rejects(db.transaction(async (tx) => {
      await raiseEvent(tx, 'backup.failed', { error: 'disk full' });
      throw new Error('the change failed');
    }), /the change failed/);
    assert.deepEqual(await rows(), [], 'no notification of a change that did not happen');
    const ids = await db.transaction((tx) => raiseEvent(tx, 'backup.failed', { error: 'disk full' }));
    const stored = await rows();
    assert.deepEqual(stored.map((row) => [row.channel, String(row.target).toLowerCase(), row.status]).sort(), [['email', 'ops@example.com', 'pending'], ['webhook', 'ops', 'pending']],
      'one delivery per target, however many rules select it; none to a disabled webhook');
    assert.deepEqual(new Set(stored.map((row) => row.id)), new Set(ids));
    assert.deepEqual(await db.transaction((tx) => raiseEvent(tx, 'license.checked_out', { license_id: 'x' })), [], 'only a disabled webhook selected: nothing written');
  });

  it('sends `email: customer` to the license customer\'s contact email, and records a failed delivery when there is none', async () => {
    await replaceNotificationSettings(db, { rules: [{ event: 'license.checked_out', email: 'customer' }] }, context);
    const customer = await createCustomer(db, { name: 'Acme' }, context);
    const license = await createLicense(db, { customerId: customer.id, type: 'time_based', validUntil: new Date(Date.now() + 30 * 86_400_000).toISOString() }, context);
    await db.transaction((tx) => raiseEvent(tx, 'license.checked_out', { license_id: license.id }));
    assert.deepEqual((await rows()).map((row) => [row.status, row.target, row.last_error]), [['failed', 'customer', NO_CUSTOMER_EMAIL]]);
    await db.execute('UPDATE customers SET email = ? WHERE id = ?', ['buyer@acme.test', customer.id]);
    await db.transaction((tx) => raiseEvent(tx, 'license.checked_out', { license_id: license.id }));
    assert.deepEqual((await rows()).filter((row) => row.status === 'pending').map((row) => [row.status, row.target]), [['pending', 'buyer@acme.test']]);
  });

  it('retries a receiver that answers 500 on the backoff schedule, then delivers exactly once', async () => {
    const receiver = await startReceiver((count) => (count === 1 ? 500 : 200));
    try {
      await hooked(receiver.url);
      const [id] = await db.transaction((tx) => raiseEvent(tx, 'backup.succeeded', { backup_id: 'b' }));
      let at = Date.now();
      const worker = deliverer(() => new Date(at));
      const first = await worker.deliverDue();
      assert.deepEqual(first.map((o) => [o.status, o.attempts, o.error]), [['pending', 1, 'HTTP 500']]);
      assert.equal(first[0]!.next_attempt_at, new Date(at + 30_000).toISOString(), 'the first retry waits 30 s');
      assert.deepEqual(await worker.deliverDue(), [], 'not due yet');
      at += 30_000;
      const second = await worker.deliverDue();
      assert.deepEqual(second.map((o) => [o.id, o.status, o.attempts]), [[id, 'delivered', 2]]);
      at += 10 * HOUR;
      assert.deepEqual(await worker.deliverDue(), [], 'a delivered notification is never sent again');
      assert.equal(receiver.received.filter((r) => r.headers['x-license-server-delivery'] === id).length, 2);
      assert.deepEqual((await rows()).map((row) => row.status), ['delivered']);
    } finally {
      await receiver.close();
    }
  });

  it('doubles the wait from 30 s to 1 h, and gives up after 24 h with a last attempt at the deadline', async () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8, 20].map((n) => retryDelayMs({ firstDelaySeconds: 30, maxDelaySeconds: 3600, giveUpHours: 24 }, n) / 1000), [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
    await hooked('http://127.0.0.1:9/down');
    const start = Date.now();
    await db.transaction((tx) => raiseEvent(tx, 'backup.succeeded', { backup_id: 'b' }, { clock: () => new Date(start) }));
    let at = start;
    const worker = deliverer(() => new Date(at));
    const attempts: DeliveryOutcome[] = [];
    for (let round = 0; round < 100; round += 1) {
      const [outcome] = await worker.deliverDue();
      if (!outcome) break;
      attempts.push(outcome);
      if (outcome.status !== 'pending') break;
      at = Date.parse(outcome.next_attempt_at!);
    }
    const last = attempts[attempts.length - 1]!;
    assert.equal(last.status, 'failed');
    assert.equal(at, start + 24 * HOUR, 'the last attempt falls on the give-up time');
    // 30 s doubling to 1 h reaches 1 h at attempt 8 (about 2 h 7 min), then one an hour to 24 h.
    assert.equal(attempts.length, 31);
    assert.deepEqual((await rows()).map((row) => [row.status, row.attempts, row.last_error]), [['failed', 31, 'ECONNREFUSED']]);
  });

  it('gives each delivery to exactly one of two deliverers working the outbox at once', async function () {
    this.timeout(60_000);
    const receiver = await startReceiver();
    const other = await openDatabase(url);
    try {
      await hooked(receiver.url);
      const ids = await db.transaction(async (tx) => {
        const all: string[] = [];
        for (let i = 0; i < 60; i += 1) all.push(...(await raiseEvent(tx, 'backup.succeeded', { backup_id: `b${i}` })));
        return all;
      });
      const now = () => new Date();
      const one = deliverer(now, { owner: 'daemon-one' });
      const two = testDeliverer(other, { clock: now, webhookTimeoutMs: 2000, owner: 'daemon-two' });
      const [a, b] = await Promise.all([one.deliverDue(), two.deliverDue()]);
      assert.equal(a.length + b.length, 60);
      const received = receiver.received.map((r) => String(r.headers['x-license-server-delivery']));
      assert.equal(received.length, 60, 'no delivery sent twice');
      assert.deepEqual(new Set(received), new Set(ids));
      if (fixture.engine === 'postgres') assert.ok(a.length > 0 && b.length > 0, `both daemons worked (${a.length}, ${b.length})`);
    } finally {
      await other.close();
      await receiver.close();
    }
  });

  it('leaves a claim of a live process until its lease ends, and takes back at once the claims of a dead one', async () => {
    const receiver = await startReceiver();
    try {
      await hooked(receiver.url);
      const [live] = await db.transaction((tx) => raiseEvent(tx, 'backup.succeeded', { backup_id: 'live' }));
      const [dead] = await db.transaction((tx) => raiseEvent(tx, 'backup.succeeded', { backup_id: 'dead' }));
      const lease = new Date(Date.now() + 60_000).toISOString();
      await db.execute('UPDATE notification_deliveries SET claimed_by = ?, claimed_until = ? WHERE id = ?', [`${hostname()}:${process.ppid}`, lease, live!]);
      await db.execute('UPDATE notification_deliveries SET claimed_by = ?, claimed_until = ? WHERE id = ?', [`${hostname()}:2147483646`, lease, dead!]);
      const worker = deliverer(() => new Date());
      assert.deepEqual(await worker.deliverDue(), [], 'both are claimed');
      assert.equal(await worker.releaseDeadClaims(), 1);
      assert.deepEqual((await worker.deliverDue()).map((o) => [o.id, o.status]), [[dead, 'delivered']]);
      const later = deliverer(() => new Date(Date.now() + 61_000));
      assert.deepEqual((await later.deliverDue()).map((o) => [o.id, o.status]), [[live, 'delivered']], 'a lease that ran out is taken over');
    } finally {
      await receiver.close();
    }
  });

  it('prunes delivered and failed deliveries older than the given age, never pending ones', async () => {
    await hooked('http://127.0.0.1:9/down');
    const old = new Date(Date.now() - 40 * 86_400_000);
    for (const status of ['delivered', 'failed', 'pending']) {
      const [id] = await db.transaction((tx) => raiseEvent(tx, 'backup.succeeded', { backup_id: status }, { clock: () => old }));
      await db.execute('UPDATE notification_deliveries SET status = ? WHERE id = ?', [status, id!]);
    }
    await db.transaction((tx) => raiseEvent(tx, 'backup.succeeded', { backup_id: 'recent' }));
    await db.execute("UPDATE notification_deliveries SET status = 'delivered' WHERE status = 'pending' AND data LIKE '%recent%'");
    assert.equal(await deliverer(() => new Date()).prune(30), 2);
    assert.deepEqual((await db.query('SELECT data FROM notification_deliveries ORDER BY data')).map((row) => JSON.parse(String(row.data)).backup_id), ['pending', 'recent']);
  });
});
