import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';
import { FakeClock } from '../support/fake-clock.js';
import { IN_PROCESS_ADMIN_TOKEN, startInProcessDaemon, type InProcessDaemon } from '../support/in-process-daemon.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * The list filters, counts and GET /api/attention as clients see them (issue 36, items 3 and 5),
 * against a real `serve`: query parameters checked (unknown or malformed: 400), filtered pages
 * that follow their Link header, counts, each attention count's link listing what it counted,
 * and the attention counts equal to /metrics' figures of the same store. Then, on the clock a
 * test moves (an in-process daemon), the expiring count and a license's status as time passes.
 */

const DAY = 86_400_000;

function metric(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(labels ? `${name}{${labels}} ` : `${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

forEachEngine('list filters, counts and attention over HTTP', (fixture) => {
  let serve: ServeProcess;
  let db: Database;
  const get = (route: string) => api(serve.url, 'GET', route, { token: serve.token! });
  const post = (route: string, body: unknown) => api(serve.url, 'POST', route, { token: serve.token!, body });
  const ids: Record<string, string> = {};

  before(async function () {
    this.timeout(60_000);
    const databaseUrl = await fixture.freshUrl();
    serve = await startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_METRICS_STORE_REFRESH: '1' });
    db = await openDatabase(databaseUrl);
    const customer = (await post('/api/customers', { name: 'Initech' })).body;
    ids.customer = customer.id;
    assert.equal((await post('/api/entitlements', { code: 'api-calls', name: 'API calls' })).status, 201);
    const license = async (name: string, days: number, extra: Record<string, unknown> = {}) => {
      const answer = await post('/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: new Date(Date.now() + days * DAY).toISOString(), ...extra });
      assert.equal(answer.status, 201, answer.text);
      ids[name] = answer.body.id;
    };
    await license('in-3-days', 3);
    await license('in-20-days', 20);
    await license('in-400-days', 400, { max_machines: 1, entitlements: [{ code: 'api-calls', usage_limit: 10 }] });
    await license('ended', 400);
    await license('deactivated', 2);
    assert.equal((await post(`/api/licenses/${ids.deactivated}/deactivate`, {})).status, 200);
    // What the API cannot make: a license that ended 2 days ago, a seat taken, usage at 90 %.
    await db.execute('UPDATE licenses SET valid_from = ?, valid_until = ? WHERE id = ?', [new Date(Date.now() - 30 * DAY).toISOString(), new Date(Date.now() - 2 * DAY).toISOString(), ids.ended!]);
    await db.execute('UPDATE license_entitlements SET used = ? WHERE license_id = ?', [9, ids['in-400-days']!]);
    const stamp = new Date().toISOString();
    await db.execute(
      'INSERT INTO machines (id, license_id, hardware_id, active, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)',
      [randomUUID(), ids['in-400-days']!, 'hw-desk-1', true, stamp, stamp],
    );
    const delivery = (status: string, attempts: number) => db.execute(
      `INSERT INTO notification_deliveries (id, event_id, event, occurred_at, data, channel, target, status, attempts, next_attempt_at, retry_from, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [randomUUID(), randomUUID(), 'license.created', stamp, '{}', 'webhook', 'dead-hook', status, attempts, new Date(Date.now() + 3_600_000).toISOString(), stamp, stamp],
    );
    await delivery('pending', 4);
    await delivery('pending', 0);
    await delivery('failed', 12);
  });
  after(async () => {
    await db?.close();
    if (serve) assert.equal((await serve.stop()).code, 0);
  });

  const idsOf = (rows: Array<{ id: string }>) => rows.map((row) => row.id).sort();
  const named = (...names: string[]) => names.map((name) => ids[name]!).sort();

  it('filters licenses by the query parameters, with a status on every license', async () => {
    const all = (await get('/api/licenses')).body as Array<{ id: string; status: string }>;
    const statuses = Object.fromEntries(all.map((l) => [l.id, l.status]));
    assert.deepEqual(
      [statuses[ids['in-3-days']!], statuses[ids['in-20-days']!], statuses[ids.ended!], statuses[ids.deactivated!]],
      ['expiring', 'active', 'expired', 'suspended'],
    );
    const cases: Array<[string, string[]]> = [
      ['status=expiring', ['in-3-days']],
      ['status=expiring&within=30d', ['in-3-days', 'in-20-days']],
      ['status=expired', ['ended']],
      ['status=expired&within=7d', ['ended']],
      ['status=expired&within=1d', []],
      ['status=suspended', ['deactivated']],
      ['status=active', ['in-20-days', 'in-400-days']],
      ['seats=full', ['in-400-days']],
      ['usage=high&active=true', ['in-400-days']],
      ['entitlement=api-calls', ['in-400-days']],
      [`customer_id=${ids.customer}&type=hybrid`, []],
      [`expires_before=${new Date(Date.now() + 10 * DAY).toISOString()}`, ['in-3-days', 'ended', 'deactivated']],
      [`validated_after=${new Date(Date.now() - DAY).toISOString().slice(0, 10)}`, ['in-400-days']],
    ];
    for (const [query, expected] of cases) {
      const answer = await get(`/api/licenses?${query}`);
      assert.equal(answer.status, 200, `${query}: ${answer.text}`);
      assert.deepEqual(idsOf(answer.body), named(...expected), query);
      const count = await get(`/api/licenses/count?${query}`);
      assert.deepEqual(count.body, { count: expected.length, exact: true }, query);
    }
  });

  it('pages a filtered list by its Link header, the filters kept in it', async () => {
    const rows: Array<{ id: string }> = [];
    const links: string[] = [];
    for (let next: string | undefined = '/api/licenses?expires_after=2000-01-01&active=true&limit=1'; next !== undefined;) {
      const answer = await get(next);
      assert.equal(answer.status, 200, answer.text);
      rows.push(...answer.body);
      const link = answer.headers.get('link');
      next = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)![1];
      if (link) links.push(link);
    }
    assert.deepEqual(idsOf(rows), named('in-3-days', 'in-20-days', 'in-400-days', 'ended'));
    assert.ok(links.every((link) => link.startsWith('</api/licenses?expires_after=2000-01-01&active=true&limit=1&cursor=')), links.join('\n'));
    const cursor = /cursor=([^>&]+)/.exec(links[0]!)![1];
    const moved = await get(`/api/licenses?expires_after=2000-01-01&active=false&limit=1&cursor=${cursor}`);
    assert.equal(moved.status, 400);
    assert.equal(moved.body.error.code, 'INVALID_INPUT');
  });

  it('refuses an unknown parameter and a malformed value with 400', async () => {
    const refusals: Array<[string, string]> = [
      ['/api/licenses?state=active', 'INVALID_INPUT'],
      ['/api/licenses?status=banned', 'INVALID_INPUT'],
      ['/api/licenses?status=expiring&within=soon', 'INVALID_INPUT'],
      ['/api/licenses?status=expiring&within=0d', 'INVALID_INPUT'],
      ['/api/licenses?within=7d', 'INVALID_INPUT'],
      ['/api/licenses?status=active&within=7d', 'INVALID_INPUT'],
      ['/api/licenses?seats=empty', 'INVALID_INPUT'],
      ['/api/licenses?usage=low', 'INVALID_INPUT'],
      ['/api/licenses?status=active&status=expired', 'INVALID_INPUT'],
      ['/api/licenses?customer_id=42', 'INVALID_ID'],
      ['/api/licenses?type=perpetual', 'INVALID_LICENSE_TYPE'],
      ['/api/licenses?entitlement=Bad%20Code', 'INVALID_ENTITLEMENT_CODE'],
      ['/api/licenses?created_after=yesterday', 'INVALID_DATE'],
      ['/api/licenses/count?limit=5', 'INVALID_INPUT'],
      ['/api/machines?hardware_id=', 'INVALID_INPUT'],
      ['/api/machines?active=maybe', 'INVALID_INPUT'],
      ['/api/machines/count?last_seen_after=2026-02-30', 'INVALID_DATE'],
      ['/api/audit/count?who=me', 'INVALID_INPUT'],
      ['/api/attention?fresh=true', 'INVALID_INPUT'],
      ['/api/notifications/deliveries?retrying=yes', 'INVALID_INPUT'],
    ];
    for (const [route, code] of refusals) {
      const answer = await get(route);
      assert.equal(answer.status, 400, `${route}: ${answer.text}`);
      assert.equal(answer.body.error.code, code, `${route}: ${answer.text}`);
    }
  });

  it('filters and counts machines and audit entries', async () => {
    const machines = await get('/api/machines?hardware_id=hw-desk-1&active=true&holding_seat=true');
    assert.equal(machines.body.length, 1);
    assert.deepEqual((await get(`/api/machines/count?license_id=${ids['in-400-days']}`)).body, { count: 1, exact: true });
    assert.deepEqual((await get('/api/machines/count?active=false')).body, { count: 0, exact: true });
    const created = (await get('/api/audit?action=license.created')).body.length;
    assert.equal(created, 5);
    assert.deepEqual((await get('/api/audit/count?action=license.created')).body, { count: created, exact: true });
    assert.deepEqual((await get('/api/notifications/deliveries?retrying=true')).body.map((d: { attempts: number }) => d.attempts), [4]);
  });

  it('GET /api/attention: each count is what its link lists, and /metrics says the same', async () => {
    const setUp = Date.now();
    // The figures of a background read that started after everything above was written: the
    // machine-limit count comes from it (it scans), and /metrics shows it.
    let text = '';
    for (;;) {
      const scraped = await get('/metrics');
      assert.equal(scraped.status, 200);
      text = scraped.text;
      const age = metric(text, 'license_server_store_figures_age_seconds');
      if (metric(text, 'license_server_store_up') === 1 && age !== undefined && Date.now() - age * 1000 > setUp) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const answer = await get('/api/attention');
    assert.equal(answer.status, 200, answer.text);
    const attention = answer.body;
    const expected = {
      licenses_expiring_7d: 1, licenses_expiring_30d: 2, licenses_expired_7d: 1, licenses_at_machine_limit: 1, licenses_usage_high: 1,
      deliveries_failed: 1, deliveries_retrying: 1, backup_targets_failing: 0,
    };
    assert.deepEqual(Object.fromEntries(Object.entries(attention.counts).map(([name, count]) => [name, (count as { count: number }).count])), expected);
    for (const [name, count] of Object.entries(attention.counts) as Array<[string, { count: number; exact: boolean; query: string; as_of: string }]>) {
      assert.equal(count.exact, true, name);
      if (name === 'licenses_at_machine_limit') {
        assert.ok(Date.parse(count.as_of) >= setUp - 1000 && Date.parse(count.as_of) <= Date.parse(attention.at), `${name} counted by the background read: ${count.as_of}`);
      } else {
        assert.equal(count.as_of, attention.at, `${name} counted at the request`);
      }
      if (name === 'backup_targets_failing') continue;
      const listed = await get(count.query);
      assert.equal(listed.status, 200, `${name}: ${count.query}`);
      assert.equal(listed.body.length, count.count, `${name}: ${count.query}`);
    }
    assert.equal(attention.backups.stale, true, 'no backup was ever made');
    assert.equal(attention.backups.newest_success_at, null);
    assert.ok(attention.signing_key.age_seconds >= 0 && attention.signing_key.age_seconds < 600);

    for (const name of Object.keys(expected).filter((name) => name !== 'backup_targets_failing')) {
      assert.equal(metric(text, 'license_server_store_attention', `list="${name}"`), attention.counts[name].count, name);
    }
    assert.equal(metric(text, 'license_server_store_notification_deliveries', 'status="failed"'), attention.counts.deliveries_failed.count);
    assert.equal(text.includes('license_server_store_backup_copy_last_failure_timestamp_seconds{'), attention.counts.backup_targets_failing.count > 0);
    assert.equal(text.includes('license_server_store_backup_last_success_timestamp_seconds{'), attention.backups.newest_success_at !== null);
    const keyAge = metric(text, 'license_server_store_signing_key_age_seconds')!;
    // Read at two moments: the key is as old in both, give or take the time between them.
    assert.ok(Math.abs(keyAge - attention.signing_key.age_seconds) <= (Date.now() - setUp) / 1000 + 1, `${keyAge} vs ${attention.signing_key.age_seconds}`);
  });
});

forEachEngine('attention and status on a clock that moves', (fixture) => {
  let daemon: InProcessDaemon;
  const clock = new FakeClock(Date.parse('2026-05-01T12:00:00.000Z'));
  const call = (method: string, route: string, body?: unknown) => api(daemon.url, method, route, { token: IN_PROCESS_ADMIN_TOKEN, ...(body === undefined ? {} : { body }) });

  before(async () => {
    daemon = await startInProcessDaemon(await fixture.freshUrl(), () => clock.now());
  });
  after(async () => {
    await daemon?.stop();
  });

  it('counts a license as expiring from exactly 7 days before its end, and expired from its end', async () => {
    const customer = (await call('POST', '/api/customers', { name: 'Globex' })).body;
    const end = Date.parse('2026-05-20T12:00:00.000Z');
    const license = (await call('POST', '/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: new Date(end).toISOString() })).body;
    const at = async (ms: number) => {
      clock.set(new Date(ms));
      const attention = (await call('GET', '/api/attention')).body;
      const status = (await call('GET', `/api/licenses/${license.id}`)).body.status;
      return [attention.counts.licenses_expiring_7d.count, attention.counts.licenses_expired_7d.count, status];
    };
    assert.deepEqual(await at(end - 7 * DAY - 1000), [0, 0, 'active']);
    assert.deepEqual(await at(end - 7 * DAY), [1, 0, 'expiring']);
    assert.deepEqual(await at(end - 1000), [1, 0, 'expiring']);
    assert.deepEqual(await at(end), [0, 1, 'expired']);
    assert.deepEqual(await at(end + 7 * DAY - 1000), [0, 1, 'expired']);
    assert.deepEqual(await at(end + 7 * DAY), [0, 0, 'expired']);
  });
});
