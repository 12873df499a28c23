import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { allRoutes } from '../../src/http/app.js';
import type { RouteDependencies } from '../../src/http/route-dependencies.js';
import { raiseEvent } from '../../src/lib/notifications/outbox.js';
import { replaceNotificationSettings } from '../../src/lib/notifications/settings.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { activationRequestFor } from '../support/activation-request.js';
import { forEachEngine } from '../support/engines.js';
import { startReceiver } from '../support/receiver.js';
import { strayTimes, strayTimesIn, unnamedRecords } from '../support/output-rule.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * The output rule of README.md ("Output for scripts") over every route of the daemon, so
 * that a new route cannot escape it: a JSON answer's records name themselves `id` (signing
 * keys: `key_id`), and every time in it is RFC 3339 in UTC to the millisecond. Only the
 * grace token's claims and the .lic file keep their whole seconds (they are signed).
 */
interface Case {
  readonly method: string;
  readonly path: () => string;
  readonly body?: () => unknown;
  /** A text/csv body in place of JSON (the imports). */
  readonly csv?: () => string;
  readonly client?: boolean;
  readonly records?: (json: any) => unknown[];
  readonly idKey?: 'key_id';
  /** A route that does not answer JSON: its type, and the time rule over its text. */
  readonly text?: RegExp;
}

forEachEngine('output for scripts: one rule over every route of the daemon', (fixture) => {
  let serve: ServeProcess;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let nas: string | undefined;
  const at = { customer: '', license: '', key: '', machine: '', backup: '', retire: '', delivery: '', token: '', bulk: '' };

  before(async () => {
    const url = await fixture.freshUrl();
    receiver = await startReceiver();
    // A webhook for every event, and one delivery in the outbox for the deliveries' routes.
    const db = await openDatabase(url);
    try {
      await replaceNotificationSettings(db, { webhooks: [{ name: 'ops', url: receiver.url, secret: 'a-secret-of-the-webhook' }], rules: [{ event: '*', webhook: 'ops' }] }, { actor: 'test' });
      await db.transaction((tx) => raiseEvent(tx, 'license.created', { license_id: '00000000-0000-4000-8000-000000000000', valid_until: '2099-12-31T00:00:00.000Z' }));
    } finally {
      await db.close();
    }
    nas = mkdtempSync(path.join(tmpdir(), 'license-output-rule-nas-'));
    serve = await startServe({
      LICENSE_DATABASE_URL: url,
      LICENSE_CLIENT_RATE_LIMIT: '0',
      LICENSE_BACKUP_ENCRYPTION_KEY: 'ab'.repeat(32),
      LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'nas', kind: 'file', path: nas }]),
    });
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
    await receiver?.close();
    if (nas) rmSync(nas, { recursive: true, force: true });
  });

  const one = (json: any) => [json];
  const each = (json: any) => json as unknown[];
  const client = () => ({ license_key: at.key, hardware_id: 'HW-1' });
  // In the order they run: what a route needs, an earlier one made.
  const cases: Record<string, Case | { skip: string }> = {
    'GET /healthz': { method: 'GET', path: () => '/healthz' },
    'GET /readyz': { method: 'GET', path: () => '/readyz' },
    'GET /': { skip: 'a redirect to the admin page' },
    'GET /admin': { skip: 'a redirect to the admin page' },
    'GET /admin/': { skip: 'the admin page: HTML' },
    'GET /admin/admin.js': { skip: 'the admin page: JavaScript' },
    'GET /api/openapi.json': { method: 'GET', path: () => '/api/openapi.json' },
    'GET /admin/admin.css': { skip: 'the admin page: CSS' },
    'GET /admin/licenses': { skip: 'the console: HTML' },
    'GET /admin/licenses/{id}': { skip: 'the console: HTML' },
    'GET /admin/customers': { skip: 'the console: HTML' },
    'GET /admin/customers/{id}': { skip: 'the console: HTML' },
    'GET /admin/machines': { skip: 'the console: HTML' },
    'GET /admin/machines/{id}': { skip: 'the console: HTML' },
    'GET /admin/entitlements': { skip: 'the console: HTML' },
    'GET /admin/entitlements/{id}': { skip: 'the console: HTML' },
    'GET /admin/audit': { skip: 'the console: HTML' },
    'GET /admin/audit/{id}': { skip: 'the console: HTML' },
    'GET /admin/deliveries': { skip: 'the console: HTML' },
    'GET /admin/deliveries/{id}': { skip: 'the console: HTML' },
    'GET /admin/backups': { skip: 'the console: HTML' },
    'GET /admin/backups/{id}': { skip: 'the console: HTML' },
    'GET /admin/signing-keys': { skip: 'the console: HTML' },
    'GET /admin/signing-keys/{id}': { skip: 'the console: HTML' },
    'GET /admin/tokens': { skip: 'the console: HTML' },
    'GET /admin/tokens/{id}': { skip: 'the console: HTML' },
    'POST /api/customers': { method: 'POST', path: () => '/api/customers', body: () => ({ name: 'Initech' }), records: one },
    'GET /api/customers': { method: 'GET', path: () => '/api/customers', records: each },
    'GET /api/customers/{id}': { method: 'GET', path: () => `/api/customers/${at.customer}`, records: one },
    'PATCH /api/customers/{id}': { method: 'PATCH', path: () => `/api/customers/${at.customer}`, body: () => ({ email: 'billing@initech.example' }), records: one },
    'POST /api/customers/{id}/deactivate': { method: 'POST', path: () => `/api/customers/${at.customer}/deactivate`, records: one },
    'POST /api/customers/{id}/activate': { method: 'POST', path: () => `/api/customers/${at.customer}/activate`, records: one },
    'POST /api/entitlements': { method: 'POST', path: () => '/api/entitlements', body: () => ({ code: 'seats', name: 'Seats' }), records: one },
    'GET /api/entitlements': { method: 'GET', path: () => '/api/entitlements', records: each },
    'POST /api/licenses': {
      method: 'POST',
      path: () => '/api/licenses',
      body: () => ({ customer_id: at.customer, type: 'hybrid', valid_until: '2099-12-31', max_machines: 3, entitlements: [{ code: 'seats', usage_limit: 50 }] }),
      records: one,
    },
    'GET /api/licenses': { method: 'GET', path: () => '/api/licenses', records: each },
    // The same route as CSV (a variant): its times in the one form too.
    'GET /api/licenses (csv)': { method: 'GET', path: () => '/api/licenses?format=csv', text: /^text\/csv; charset=utf-8/ },
    'POST /api/customers/import': { method: 'POST', path: () => '/api/customers/import', csv: () => 'name,email\r\nGlobex,\r\n', records: (json) => json.created },
    'POST /api/licenses/import': { method: 'POST', path: () => '/api/licenses/import', csv: () => `customer_id,type,valid_until\r\n${at.customer},time_based,2099-12-31\r\n`, records: (json) => json.created },
    'GET /api/licenses/{id}': { method: 'GET', path: () => `/api/licenses/${at.license}`, records: one },
    'GET /api/licenses/count': { method: 'GET', path: () => '/api/licenses/count?status=active' },
    'GET /api/search': {
      method: 'GET',
      path: () => '/api/search?q=Initech',
      records: (json) => Object.values(json).flatMap((group: any) => (typeof group === 'object' && group !== null ? group.items : [])),
    },
    'GET /api/attention': { method: 'GET', path: () => '/api/attention' },
    'PATCH /api/licenses/{id}': { method: 'PATCH', path: () => `/api/licenses/${at.license}`, body: () => ({ metadata: { crm_id: 'AC-1' } }), records: (json) => [json.license] },
    'POST /api/licenses/{id}/renew': { method: 'POST', path: () => `/api/licenses/${at.license}/renew`, body: () => ({ by: '1d' }), records: (json) => [json.license] },
    'POST /api/licenses/{id}/deactivate': { method: 'POST', path: () => `/api/licenses/${at.license}/deactivate`, records: one },
    'POST /api/licenses/{id}/activate': { method: 'POST', path: () => `/api/licenses/${at.license}/activate`, records: one },
    'POST /api/v1/validate': { method: 'POST', path: () => '/api/v1/validate', client: true, body: () => ({ ...client(), version: '2.1.0' }) },
    'POST /api/v1/usage': {
      method: 'POST',
      path: () => '/api/v1/usage',
      client: true,
      body: () => ({ ...client(), entitlement_code: 'seats', quantity: 2, occurred_at: new Date().toISOString(), idempotency_key: 'report-1' }),
    },
    'POST /api/v1/release': { method: 'POST', path: () => '/api/v1/release', client: true, body: client },
    'GET /api/licenses/{id}/usage': { method: 'GET', path: () => `/api/licenses/${at.license}/usage`, records: each },
    'POST /api/licenses/{id}/checkout': { method: 'POST', path: () => `/api/licenses/${at.license}/checkout`, body: () => ({ ttl_days: 30, hardware_id: 'HW-2' }) },
    // The same route with an activation request in place of hardware_id (a variant: not a route of its own).
    'POST /api/licenses/{id}/checkout (request)': {
      method: 'POST',
      path: () => `/api/licenses/${at.license}/checkout`,
      body: () => ({ ttl_days: 30, request: activationRequestFor(at.key, 'HW-2').text }),
    },
    'GET /api/machines': { method: 'GET', path: () => '/api/machines', records: each },
    'GET /api/machines/{id}': { method: 'GET', path: () => `/api/machines/${at.machine}`, records: one },
    'POST /api/machines/{id}/deactivate': { method: 'POST', path: () => `/api/machines/${at.machine}/deactivate`, records: (json) => [json.machine] },
    'POST /api/machines/{id}/activate': { method: 'POST', path: () => `/api/machines/${at.machine}/activate`, records: (json) => [json.machine] },
    'POST /api/machines/{id}/release': { method: 'POST', path: () => `/api/machines/${at.machine}/release`, body: () => ({ lost_file: true }), records: (json) => [json.machine] },
    'POST /api/bulk (dry run)': { method: 'POST', path: () => '/api/bulk', body: () => ({ target: 'licenses', action: 'extend', by: '1d', filter: { customer_id: at.customer }, dry_run: true }), records: (json) => json.first },
    'POST /api/bulk': { method: 'POST', path: () => '/api/bulk', body: () => ({ target: 'licenses', action: 'extend', by: '1d', filter: { customer_id: at.customer } }), records: (json) => [json, ...json.errors] },
    'GET /api/bulk': { method: 'GET', path: () => '/api/bulk', records: each },
    'GET /api/bulk/{id}': { method: 'GET', path: () => `/api/bulk/${at.bulk}`, records: (json) => [json, ...json.errors] },
    'POST /api/bulk/{id}/cancel': { skip: 'a job of one license is over before it could be cancelled here; it answers a BulkJob as GET /api/bulk/{id} does (test/http/bulk.test.ts cancels one)' },
    'GET /api/audit': { method: 'GET', path: () => '/api/audit?limit=1000', records: each },
    'GET /api/notifications/deliveries': { method: 'GET', path: () => '/api/notifications/deliveries', records: each },
    'GET /api/notifications/deliveries/{id}': { method: 'GET', path: () => `/api/notifications/deliveries/${at.delivery}`, records: one },
    'POST /api/notifications/deliveries/{id}/redeliver': { method: 'POST', path: () => `/api/notifications/deliveries/${at.delivery}/redeliver`, records: one },
    'GET /api/whoami': { method: 'GET', path: () => '/api/whoami' },
    'GET /api/machines/count': { method: 'GET', path: () => '/api/machines/count?holding_seat=true' },
    'GET /api/audit/count': { method: 'GET', path: () => '/api/audit/count?entity_type=license' },
    'POST /api/tokens': { method: 'POST', path: () => '/api/tokens', body: () => ({ name: 'output-rule', scopes: ['read'], expires_in: '30d' }), records: one },
    'GET /api/tokens': { method: 'GET', path: () => '/api/tokens', records: each },
    'GET /api/tokens/{id}': { method: 'GET', path: () => `/api/tokens/${at.token}`, records: one },
    'POST /api/tokens/{id}/revoke': { method: 'POST', path: () => `/api/tokens/${at.token}/revoke`, records: one },
    'GET /api/signing-key': { method: 'GET', path: () => '/api/signing-key' },
    'POST /api/signing-keys/rotate': { method: 'POST', path: () => '/api/signing-keys/rotate', records: (json) => [json.previous, json.active], idKey: 'key_id' },
    'GET /api/signing-keys': { method: 'GET', path: () => '/api/signing-keys', records: (json) => json.keys, idKey: 'key_id' },
    'GET /api/signing-keys/jwks': { method: 'GET', path: () => '/api/signing-keys/jwks' },
    // Public, no token; after the rotation above, so that a key carries an endorsement.
    'GET /.well-known/jwks.json': { method: 'GET', path: () => '/.well-known/jwks.json', client: true },
    'GET /api/v1/signing-keys': { method: 'GET', path: () => '/api/v1/signing-keys', client: true, records: (json) => json.keys, idKey: 'key_id' },
    'POST /api/signing-keys/{key_id}/retire': { method: 'POST', path: () => `/api/signing-keys/${at.retire}/retire`, body: () => ({ force: true }), records: one, idKey: 'key_id' },
    'POST /api/backups': { method: 'POST', path: () => '/api/backups', records: one },
    'GET /api/backups': { method: 'GET', path: () => '/api/backups', records: (json) => json.backups },
    'GET /api/backups/{backup_id}/download': { skip: 'the archive\'s bytes' },
    'GET /api/backups/status': { method: 'GET', path: () => '/api/backups/status?max_age=1d', records: (json) => json.places },
    'POST /api/backups/{backup_id}/copy': { method: 'POST', path: () => `/api/backups/${at.backup}/copy`, body: () => ({ to: ['nas'] }) },
    'POST /api/backups/{backup_id}/validate': { method: 'POST', path: () => `/api/backups/${at.backup}/validate`, records: one },
    'POST /api/backups/{backup_id}/restore': { method: 'POST', path: () => `/api/backups/${at.backup}/restore`, body: () => ({ confirm: at.backup }) },
    'POST /api/replicas/{target}/restore': { skip: 'needs a daemon that replicates with Litestream; its answer is the restore report above with replica and configuration, checked against docs/openapi.json in test/commands/replication-point-in-time.test.ts' },
    // Prometheus text: times are numbers (seconds since 1970), never RFC 3339 text.
    'GET /metrics': { method: 'GET', path: () => '/metrics', text: /^text\/plain; version=0\.0\.4/ },
  };

  it('has a case for every route, and for none the daemon does not have', () => {
    const routes = allRoutes({} as RouteDependencies).map((route) => `${route.method} ${route.path.replace(/:(\w+)/g, '{$1}')}`);
    assert.deepEqual(Object.keys(cases).filter((name) => !name.endsWith(')')).sort(), routes.sort());
  });

  for (const [name, spec] of Object.entries(cases)) {
    if ('skip' in spec) continue;
    it(`${name}: its records are named by ${spec.idKey ?? 'id'}, its times are in the one form`, async () => {
      const answer = await api(serve.url, spec.method, spec.path(), spec.csv
        ? { token: serve.token, raw: spec.csv(), headers: { 'content-type': 'text/csv' } }
        : { token: spec.client ? undefined : serve.token, body: spec.body?.() ?? (spec.method === 'GET' ? undefined : {}) });
      assert.ok(answer.status >= 200 && answer.status < 300, `${name}: ${answer.status} ${answer.text}`);
      if (spec.text) {
        assert.match(answer.headers.get('content-type') ?? '', spec.text);
        assert.deepEqual(strayTimes(answer.text), [], `${name}:\n${answer.text}`);
        return;
      }
      assert.match(answer.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual(strayTimesIn(answer.body), [], `${name}:\n${answer.text}`);
      assert.deepEqual(unnamedRecords(spec.records?.(answer.body) ?? [], spec.idKey), [], `${name}: records without ${spec.idKey ?? 'id'}`);
      // What later routes need.
      if (name === 'POST /api/customers') at.customer = answer.body.id;
      if (name === 'POST /api/licenses') [at.license, at.key] = [answer.body.id, answer.body.key];
      if (name === 'GET /api/machines') at.machine = answer.body[0].id;
      if (name === 'GET /api/notifications/deliveries') at.delivery = answer.body.at(-1).id;
      if (name === 'POST /api/signing-keys/rotate') at.retire = answer.body.previous.key_id;
      if (name === 'POST /api/backups') at.backup = answer.body.id;
      if (name === 'POST /api/tokens') at.token = answer.body.id;
      if (name === 'POST /api/bulk') at.bulk = answer.body.id;
    });
  }
});
