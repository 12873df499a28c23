import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { listAudit } from '../../../src/lib/audit.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { isLicenseServerError } from '../../../src/lib/errors.js';
import { Deliverer, type RetrySchedule } from '../../../src/lib/notifications/deliverer.js';
import { listDeliveriesPage, redeliver, showDelivery, type Delivery, type DeliveryFilter } from '../../../src/lib/notifications/deliveries.js';
import { raiseEvent } from '../../../src/lib/notifications/outbox.js';
import type { EventName } from '../../../src/lib/notifications/events.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';
import { startReceiver } from '../../support/receiver.js';

const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function rejectsWith(code: string): (error: unknown) => boolean {
  return (error) => {
    assert.ok(isLicenseServerError(error), String(error));
    assert.equal(error.code, code, error.message);
    return true;
  };
}

forEachEngine('notification deliveries: list, show, redeliver', (fixture) => {
  let db: Database;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let answers: number[];
  let clockAt: number;
  const clock = () => new Date(clockAt);
  const context = { actor: 'cli:test', clock };

  const settings = (url: string, extra: Record<string, unknown> = {}) => ({
    webhooks: [{ name: 'ops', url, secret: 'a-secret-of-the-webhook' }],
    rules: [{ event: '*', webhook: 'ops' }],
    ...extra,
  });
  const raise = async (event: EventName, data: Record<string, unknown> = {}) => {
    const ids = await db.transaction((tx) => raiseEvent(tx, event, data, { clock }));
    clockAt += 1000;
    return ids;
  };
  const deliverer = (retry: RetrySchedule = { firstDelaySeconds: 30, maxDelaySeconds: 3600, giveUpHours: 24 }) =>
    new Deliverer({ database: () => db, server: () => 'test', retry: () => retry, email: () => undefined, allowLinkLocal: () => false, log: () => undefined, clock, owner: `test:${randomUUID()}` });
  const walk = async (filter: DeliveryFilter) => {
    const seen: Delivery[] = [];
    let cursor: string | undefined;
    do {
      const page = await listDeliveriesPage(db, { ...filter, limit: 2, ...(cursor === undefined ? {} : { cursor }) });
      assert.ok(page.items.length <= 2);
      seen.push(...page.items);
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
    return seen;
  };

  before(async () => {
    db = await fixture.freshDatabase();
    answers = [];
    receiver = await startReceiver(() => answers.shift() ?? 200);
    clockAt = Date.parse('2026-03-01T10:00:00.000Z');
    await replaceNotificationSettings(db, settings(receiver.url), context);
  });
  after(async () => receiver?.close());

  it('lists newest first with every field, filters by status and event, and pages by cursor over each exactly once', async () => {
    const raised: string[] = [];
    for (const event of ['backup.succeeded', 'license.created', 'backup.succeeded', 'backup.failed', 'license.created'] as const) {
      raised.push(...(await raise(event, { n: raised.length })));
    }
    answers.push(500);
    // The first delivery is attempted once and fails (pending), the second is delivered.
    await deliverer().deliverDue({ ids: raised.slice(0, 1) });
    await deliverer().deliverDue({ ids: raised.slice(1, 2) });
    // The third gives up at once (a window of no hours): failed.
    answers.push(503);
    await deliverer({ firstDelaySeconds: 30, maxDelaySeconds: 3600, giveUpHours: 0 }).deliverDue({ ids: raised.slice(2, 3) });

    const all = await walk({});
    assert.deepEqual(all.map((d) => d.id), [...raised].reverse(), 'newest first, each once');
    const [first] = all.slice(-1);
    assert.deepEqual(Object.keys(first!).sort(), ['attempts', 'channel', 'created_at', 'data', 'delivered_at', 'event', 'event_id', 'id', 'last_attempt_at', 'last_error', 'last_status', 'next_attempt_at', 'occurred_at', 'status', 'target'].sort());
    assert.equal(first!.status, 'pending');
    assert.equal(first!.attempts, 1);
    assert.equal(first!.last_status, 500);
    assert.equal(first!.channel, 'webhook');
    assert.equal(first!.target, 'ops');
    assert.deepEqual(first!.data, { n: 0 });
    assert.match(first!.next_attempt_at!, TIME);
    for (const time of [first!.created_at, first!.occurred_at, first!.last_attempt_at!]) assert.match(time, TIME);
    const delivered = all.find((d) => d.id === raised[1])!;
    assert.equal(delivered.status, 'delivered');
    assert.match(delivered.delivered_at!, TIME);
    assert.equal(delivered.next_attempt_at, null, 'only a pending delivery has a next attempt');
    assert.equal(delivered.last_error, null);
    const failed = all.find((d) => d.id === raised[2])!;
    assert.equal(failed.status, 'failed');
    assert.equal(failed.next_attempt_at, null);
    assert.match(failed.last_error!, /HTTP 503/);

    assert.deepEqual((await walk({ status: 'failed' })).map((d) => d.id), [raised[2]]);
    assert.deepEqual((await walk({ status: 'delivered' })).map((d) => d.id), [raised[1]]);
    assert.deepEqual((await walk({ status: 'pending' })).map((d) => d.id), [raised[4], raised[3], raised[0]]);
    assert.deepEqual((await walk({ event: 'backup.succeeded' })).map((d) => d.id), [raised[2], raised[0]]);
    assert.deepEqual((await walk({ event: 'backup.succeeded', status: 'pending' })).map((d) => d.id), [raised[0]]);
    assert.deepEqual((await walk({ event: 'no.such' })).map((d) => d.id), []);
  });

  it('refuses a cursor made with other filters, an unknown status, and both offset and cursor', async () => {
    const page = await listDeliveriesPage(db, { limit: 1 });
    assert.ok(page.next_cursor);
    await assert.rejects(listDeliveriesPage(db, { status: 'failed', cursor: page.next_cursor! }), /other filters/);
    await assert.rejects(listDeliveriesPage(db, { status: 'lost' as never }), rejectsWith('INVALID_INPUT'));
    await assert.rejects(listDeliveriesPage(db, { offset: 1, cursor: page.next_cursor! }), rejectsWith('INVALID_INPUT'));
  });

  it('shows one delivery by id; an unknown id is DELIVERY_NOT_FOUND, a malformed one INVALID_ID', async () => {
    const [id] = await raise('license.renewed', { license_id: randomUUID(), valid_until: '2027-01-01T00:00:00.000Z' });
    const shown = await showDelivery(db, id!.toUpperCase());
    assert.equal(shown.id, id);
    assert.equal(shown.event, 'license.renewed');
    assert.equal(shown.data.valid_until, '2027-01-01T00:00:00.000Z');
    await assert.rejects(showDelivery(db, randomUUID()), rejectsWith('DELIVERY_NOT_FOUND'));
    await assert.rejects(showDelivery(db, 'nope'), rejectsWith('INVALID_ID'));
  });

  it('redelivers a delivered delivery under the same id: pending and due now, attempts kept, audited, then sent again', async () => {
    const [id] = await raise('backup.succeeded', { backup_id: 'b-1' });
    const sent = receiver.received.length;
    await deliverer().deliverDue({ ids: [id!] });
    assert.equal((await showDelivery(db, id!)).status, 'delivered');
    clockAt += 3_600_000;
    const again = await redeliver(db, id!, context);
    assert.equal(again.status, 'pending');
    assert.equal(again.next_attempt_at, clock().toISOString());
    assert.equal(again.delivered_at, null);
    assert.equal(again.attempts, 1);
    assert.deepEqual(await showDelivery(db, id!), again, 'what it returns is what is stored');
    const [row] = await db.query('SELECT retry_from, claimed_by, claimed_until FROM notification_deliveries WHERE id = ?', [id!]);
    assert.equal(new Date(row!.retry_from as string).toISOString(), clock().toISOString(), 'a fresh retry window');
    const [entry] = await listAudit(db, { action: 'notification.redelivered', entityId: id! });
    assert.equal(entry?.actor, 'cli:test');
    assert.deepEqual(entry?.details, { event: 'backup.succeeded', channel: 'webhook', target: 'ops', previous_status: 'delivered', attempts: 1 });

    const outcomes = await deliverer().deliverDue({ ids: [id!] });
    assert.deepEqual(outcomes.map((o) => [o.id, o.status, o.attempts]), [[id, 'delivered', 2]]);
    const twice = receiver.received.slice(sent).filter((r) => r.headers['x-license-server-delivery'] === id);
    assert.equal(twice.length, 2, 'sent once, then once again');
    assert.equal(twice[0]!.body, twice[1]!.body, 'the same body, byte for byte');
  });

  it('gives a failed delivery a fresh retry window: without it, the next failure gives up at once', async () => {
    const retry = { firstDelaySeconds: 30, maxDelaySeconds: 3600, giveUpHours: 1 };
    const [id] = await raise('backup.failed', { error: 'disk full' });
    clockAt += 2 * 3_600_000;
    answers.push(500);
    assert.equal((await deliverer(retry).deliverDue({ ids: [id!] }))[0]?.status, 'failed', 'past its window: given up after one attempt');
    await redeliver(db, id!, context);
    answers.push(500);
    const [outcome] = await deliverer(retry).deliverDue({ ids: [id!] });
    assert.equal(outcome?.status, 'pending', 'a failure in the fresh window is retried');
    assert.equal(outcome?.attempts, 2);
    const stored = await showDelivery(db, id!);
    assert.equal(stored.status, 'pending');
    assert.equal(stored.last_status, 500);
  });

  it('clears a claim, so that the claimer records nothing and the next deliverer sends it', async () => {
    const [id] = await raise('backup.succeeded', {});
    const future = new Date(clockAt + 600_000).toISOString();
    await db.execute('UPDATE notification_deliveries SET claimed_by = ?, claimed_until = ? WHERE id = ?', ['elsewhere:1', future, id!]);
    assert.deepEqual(await deliverer().deliverDue({ ids: [id!] }), [], 'claimed elsewhere: not sent');
    await redeliver(db, id!, context);
    const [row] = await db.query('SELECT claimed_by, claimed_until FROM notification_deliveries WHERE id = ?', [id!]);
    assert.deepEqual({ ...row }, { claimed_by: null, claimed_until: null });
    assert.equal((await deliverer().deliverDue({ ids: [id!] }))[0]?.status, 'delivered');
  });

  it('sends to the webhook of that name as configured now, and refuses when it is gone or disabled (DELIVERY_TARGET_GONE, nothing changed)', async () => {
    const [id] = await raise('backup.succeeded', {});
    await deliverer().deliverDue({ ids: [id!] });
    const moved = await startReceiver();
    try {
      await replaceNotificationSettings(db, settings(moved.url.replace('/hook', '/moved')), context);
      await redeliver(db, id!, context);
      await deliverer().deliverDue({ ids: [id!] });
      assert.deepEqual(moved.received.map((r) => [r.path, r.headers['x-license-server-delivery']]), [['/moved', id]]);

      await replaceNotificationSettings(db, { webhooks: [{ name: 'ops', url: moved.url, secret: 'a-secret-of-the-webhook', enabled: false }], rules: [] }, context);
      const before = await showDelivery(db, id!);
      await assert.rejects(redeliver(db, id!, context), (error) => rejectsWith('DELIVERY_TARGET_GONE')(error) && /disabled/.test((error as Error).message));
      await replaceNotificationSettings(db, { webhooks: [], rules: [] }, context);
      await assert.rejects(redeliver(db, id!, context), (error) => rejectsWith('DELIVERY_TARGET_GONE')(error) && /no longer defined/.test((error as Error).message));
      assert.deepEqual(await showDelivery(db, id!), before);
      assert.equal((await listAudit(db, { action: 'notification.redelivered', entityId: id! })).length, 1, 'only the redelivery that happened is audited');
    } finally {
      await replaceNotificationSettings(db, settings(receiver.url), context);
      await moved.close();
    }
  });

  it('redelivers an email to a customer who had no address to the address the customer has now', async () => {
    await replaceNotificationSettings(db, { ...settings(receiver.url), rules: [{ event: 'license.renewed', email: 'customer' }] }, context);
    try {
      const customer = await createCustomer(db, { name: 'Initech' }, context);
      const [id] = await raise('license.renewed', { customer_id: customer.id });
      const failed = await showDelivery(db, id!);
      assert.deepEqual([failed.status, failed.channel, failed.target], ['failed', 'email', 'customer']);
      await assert.rejects(redeliver(db, id!, context), rejectsWith('DELIVERY_TARGET_GONE'));
      await db.execute('UPDATE customers SET email = ? WHERE id = ?', ['billing@initech.example', customer.id]);
      const again = await redeliver(db, id!, context);
      assert.deepEqual([again.status, again.target], ['pending', 'billing@initech.example']);
      assert.equal((await showDelivery(db, id!)).target, 'billing@initech.example');
    } finally {
      await replaceNotificationSettings(db, settings(receiver.url), context);
    }
  });

  it('answers DELIVERY_NOT_FOUND for a redelivery of an unknown id', async () => {
    await assert.rejects(redeliver(db, randomUUID(), context), rejectsWith('DELIVERY_NOT_FOUND'));
  });
});
