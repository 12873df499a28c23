import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { raiseEvent } from '../../src/lib/notifications/outbox.js';
import type { EventName } from '../../src/lib/notifications/events.js';
import { replaceNotificationSettings } from '../../src/lib/notifications/settings.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { eventually } from '../support/fake-clock.js';
import { startReceiver } from '../support/receiver.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * The deliveries of the outbox over the REST API, against a real daemon whose deliverer sends
 * to a real receiver: list (filters, Link paging), show, and redeliver with its scope.
 */
forEachEngine('GET /api/notifications/deliveries and POST .../redeliver', (fixture) => {
  let url: string;
  let serve: ServeProcess;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let admin: string;
  let reader: string;
  const ids: Record<string, string> = {};
  const sentWith = (id: string) => receiver.received.filter((request) => request.headers['x-license-server-delivery'] === id);

  before(async function () {
    this.timeout(60_000);
    receiver = await startReceiver();
    url = await fixture.freshUrl();
    // The outbox filled before the daemon runs: two pending deliveries, and one given up on.
    const db = await openDatabase(url);
    try {
      await replaceNotificationSettings(db, { webhooks: [{ name: 'ops', url: receiver.url, secret: 'a-secret-of-the-webhook' }], rules: [{ event: '*', webhook: 'ops' }] }, { actor: 'test' });
      const raise = async (event: EventName, data: Record<string, unknown>) => (await db.transaction((tx) => raiseEvent(tx, event, data)))[0]!;
      ids.created = await raise('license.created', { license_id: randomUUID() });
      await new Promise((resolve) => setTimeout(resolve, 5));
      ids.failed = await raise('backup.failed', { error: 'disk full' });
      await new Promise((resolve) => setTimeout(resolve, 5));
      ids.succeeded = await raise('backup.succeeded', { backup_id: 'b-1' });
      await db.execute(`UPDATE notification_deliveries SET status = 'failed', attempts = 12, last_status = 500, last_error = 'HTTP 500', last_attempt_at = created_at WHERE id = ?`, [ids.failed]);
    } finally {
      await db.close();
    }
    serve = await startServe({ LICENSE_DATABASE_URL: url });
    admin = serve.token!;
    reader = ok(await runCli(['token', 'create', '--name', 'reader', '--scope', 'read', '--json'], { env: { LICENSE_DATABASE_URL: url } })).json().token;
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
    await receiver?.close();
  });

  it('the daemon delivers what was pending; the list shows each delivery newest first, by status and by event', async () => {
    await eventually(() => sentWith(ids.created!).length === 1 && sentWith(ids.succeeded!).length === 1, 'the daemon delivered both pending deliveries');
    await eventually(async () => (await api(serve.url, 'GET', '/api/notifications/deliveries?status=pending', { token: reader })).body.length === 0, 'both are recorded as delivered');
    assert.equal(sentWith(ids.failed!).length, 0, 'a failed delivery is not sent again on its own');

    const all = await api(serve.url, 'GET', '/api/notifications/deliveries', { token: reader });
    assert.equal(all.status, 200, all.text);
    assert.deepEqual(all.body.map((d: { id: string }) => d.id), [ids.succeeded, ids.failed, ids.created]);
    assert.equal(all.headers.get('link'), null);
    const failed = all.body[1];
    assert.deepEqual([failed.status, failed.attempts, failed.last_status, failed.last_error, failed.next_attempt_at], ['failed', 12, 500, 'HTTP 500', null]);
    assert.deepEqual(all.body[0].data, { backup_id: 'b-1' });
    assert.equal(all.body[0].status, 'delivered');

    const onlyFailed = await api(serve.url, 'GET', '/api/notifications/deliveries?status=failed', { token: reader });
    assert.deepEqual(onlyFailed.body.map((d: { id: string }) => d.id), [ids.failed]);
    const byEvent = await api(serve.url, 'GET', '/api/notifications/deliveries?event=license.created', { token: reader });
    assert.deepEqual(byEvent.body.map((d: { id: string }) => d.id), [ids.created]);
  });

  it('pages with limit and the Link header, keeping the filters', async () => {
    const seen: string[] = [];
    let next: string | null = '/api/notifications/deliveries?status=delivered&limit=1';
    while (next !== null) {
      const page = await api(serve.url, 'GET', next, { token: reader });
      assert.equal(page.status, 200, page.text);
      seen.push(...page.body.map((d: { id: string }) => d.id));
      next = /^<([^>]+)>; rel="next"$/.exec(page.headers.get('link') ?? '')?.[1] ?? null;
      if (next !== null) assert.match(next, /^\/api\/notifications\/deliveries\?status=delivered&limit=1&cursor=/);
    }
    assert.deepEqual(seen, [ids.succeeded, ids.created]);
  });

  it('refuses an unknown status or parameter (400 INVALID_INPUT), and answers 404 DELIVERY_NOT_FOUND and 400 INVALID_ID for one delivery', async () => {
    for (const query of ['status=lost', 'state=failed', 'limit=1001']) {
      const refused = await api(serve.url, 'GET', `/api/notifications/deliveries?${query}`, { token: reader });
      assert.equal(refused.status, 400, query);
      assert.equal(refused.body.error.code, 'INVALID_INPUT', query);
    }
    const one = await api(serve.url, 'GET', `/api/notifications/deliveries/${ids.failed}`, { token: reader });
    assert.equal(one.status, 200);
    assert.deepEqual(one.body.data, { error: 'disk full' });
    const missing = await api(serve.url, 'GET', `/api/notifications/deliveries/${randomUUID()}`, { token: reader });
    assert.deepEqual([missing.status, missing.body.error.code], [404, 'DELIVERY_NOT_FOUND']);
    const malformed = await api(serve.url, 'GET', '/api/notifications/deliveries/not-an-id', { token: reader });
    assert.deepEqual([malformed.status, malformed.body.error.code], [400, 'INVALID_ID']);
  });

  it('redeliver needs admin (403 TOKEN_SCOPE for read, nothing changes); with it the failed delivery is pending, then sent by the daemon under its id', async () => {
    const refused = await api(serve.url, 'POST', `/api/notifications/deliveries/${ids.failed}/redeliver`, { token: reader, body: {} });
    assert.deepEqual([refused.status, refused.body.error.code], [403, 'TOKEN_SCOPE']);
    assert.equal((await api(serve.url, 'GET', `/api/notifications/deliveries/${ids.failed}`, { token: reader })).body.status, 'failed');
    const unknownField = await api(serve.url, 'POST', `/api/notifications/deliveries/${ids.failed}/redeliver`, { token: admin, body: { now: true } });
    assert.deepEqual([unknownField.status, unknownField.body.error.code], [400, 'INVALID_INPUT']);

    const redelivered = await api(serve.url, 'POST', `/api/notifications/deliveries/${ids.failed}/redeliver`, { token: admin });
    assert.equal(redelivered.status, 200, redelivered.text);
    assert.deepEqual([redelivered.body.id, redelivered.body.status, redelivered.body.attempts], [ids.failed, 'pending', 12]);
    assert.ok(redelivered.body.next_attempt_at);
    await eventually(() => sentWith(ids.failed!).length === 1, 'the daemon sent the redelivered delivery', 15_000);
    assert.equal(JSON.parse(sentWith(ids.failed!)[0]!.body).event, 'backup.failed');
    await eventually(async () => (await api(serve.url, 'GET', `/api/notifications/deliveries/${ids.failed}`, { token: reader })).body.status === 'delivered', 'it is recorded as delivered');
    const shown = (await api(serve.url, 'GET', `/api/notifications/deliveries/${ids.failed}`, { token: reader })).body;
    assert.equal(shown.attempts, 13);
    assert.equal(shown.last_error, null);
    const audit = await api(serve.url, 'GET', `/api/audit?action=notification.redelivered&entity_id=${ids.failed}`, { token: admin });
    assert.deepEqual(audit.body.map((entry: { actor: string }) => entry.actor), ['token:bootstrap']);
    const missing = await api(serve.url, 'POST', `/api/notifications/deliveries/${randomUUID()}/redeliver`, { token: admin });
    assert.deepEqual([missing.status, missing.body.error.code], [404, 'DELIVERY_NOT_FOUND']);
  });
});
