import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { allRoutes } from '../../src/http/app.js';
import type { RouteDependencies } from '../../src/http/route-dependencies.js';
import { scopeAllows, type Scope } from '../../src/lib/admin-tokens.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * The full license key is what /api/v1/validate takes: with it a `read` token could fill a
 * node-locked license's seats and have its decryption key sealed for machines of its own. So
 * only `licenses` (or `admin`) sees it, on every route that returns a license.
 */
forEachEngine('license keys by scope', (fixture) => {
  let serve: ServeProcess;
  let databaseUrl: string;
  let admin: string;
  let license: { id: string; key: string; key_prefix: string };
  let customerId: string;
  let machineId: string;
  let deliveryId: string;
  let bulkId: string;
  const token = async (name: string, scopes: string[]) =>
    ok(await runCli(['token', 'create', '--name', name, ...scopes.flatMap((scope) => ['--scope', scope]), '--json'], { env: { LICENSE_DATABASE_URL: databaseUrl } })).json().token as string;

  before(async () => {
    databaseUrl = await fixture.freshUrl();
    serve = await startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_CLIENT_RATE_LIMIT: '0' });
    admin = serve.token!;
    const call = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: admin, body });
    // A webhook for every event, so that the outbox holds the license's events: their data, which
    // a read token sees among the deliveries, must not carry the key either.
    const dir = mkdtempSync(path.join(tmpdir(), 'license-key-visibility-'));
    try {
      writeFileSync(path.join(dir, 'n.yaml'), 'webhooks:\n  - name: ops\n    url: http://127.0.0.1:9/hook\n    secret: a-secret-of-the-webhook\nrules:\n  - event: "*"\n    webhook: ops\n');
      ok(await runCli(['notifications', 'set', '--file', path.join(dir, 'n.yaml')], { env: { LICENSE_DATABASE_URL: databaseUrl } }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    customerId = (await call('POST', '/api/customers', { name: 'Initech' })).body.id;
    assert.equal((await call('POST', '/api/entitlements', { code: 'seats', name: 'Seats' })).status, 201);
    license = (await call('POST', '/api/licenses', {
      customer_id: customerId, type: 'hybrid', valid_until: '2099-01-01', max_machines: 2, with_decryption_key: true, entitlements: [{ code: 'seats', usage_limit: 10 }],
    })).body;
    // Every kind of record that names the license: a machine, a checkout, a usage report, audit entries.
    const validated = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: 'DESK-1', version: '1.0' } });
    assert.equal(validated.body.valid, true, validated.text);
    assert.equal((await call('POST', `/api/licenses/${license.id}/checkout`, { ttl_days: 7, hardware_id: 'DESK-1' })).status, 200);
    const usage = await api(serve.url, 'POST', '/api/v1/usage', {
      body: { license_key: license.key, hardware_id: 'DESK-1', entitlement_code: 'seats', quantity: 1, occurred_at: new Date().toISOString(), idempotency_key: 'u-1' },
    });
    assert.equal(usage.status, 201, usage.text);
    machineId = (await call('GET', `/api/machines?license_id=${license.id}`)).body[0].id;
    deliveryId = (await call('GET', '/api/notifications/deliveries?event=license.checked_out')).body[0].id;
    // A bulk job over the license that leaves it as it is: its record must not show the key either.
    bulkId = (await call('POST', '/api/bulk', { target: 'licenses', action: 'reinstate', filter: { customer_id: customerId } })).body.id;
  });
  after(async () => {
    await serve?.stop();
  });

  /** Every GET route a token with `scopes` may use, with its ids filled in. */
  const readableRoutes = (scopes: Scope[]) =>
    allRoutes({} as RouteDependencies)
      .filter((route) => route.access === 'admin' && route.method === 'GET' && (route.scope === 'any' || scopeAllows(scopes, route.scope ?? 'admin')))
      .map((route) => route.path
        .replace('/api/licenses/:id', `/api/licenses/${license.id}`)
        .replace('/api/customers/:id', `/api/customers/${customerId}`)
        .replace('/api/machines/:id', `/api/machines/${machineId}`)
        .replace('/api/notifications/deliveries/:id', `/api/notifications/deliveries/${deliveryId}`)
        .replace('/api/bulk/:id', `/api/bulk/${bulkId}`)
        .replace(/\/api\/audit$/, '/api/audit?limit=1000')
        // The license's own key prefix, which finds it: the answer echoes the query.
        .replace(/\/api\/search$/, `/api/search?q=${encodeURIComponent(license.key_prefix)}`));
  const keyForms = () => [license.key, license.key.replace(/-/g, '')];

  it('gives a read token the key prefix and never the key, on every route it may read', async () => {
    const reader = await token(`reader-${fixture.engine}`, ['read']);
    const routes = readableRoutes(['read']);
    assert.ok(routes.length >= 10 && routes.includes(`/api/licenses/${license.id}`), routes.join(' '));
    for (const route of routes) {
      const answer = await api(serve.url, 'GET', route, { token: reader });
      assert.equal(answer.status, 200, `${route}: ${answer.text}`);
      for (const form of keyForms()) assert.ok(!answer.text.includes(form), `${route} shows the license key to a read token`);
    }
    const shown = (await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: reader })).body;
    assert.equal(shown.key_prefix, license.key_prefix);
    assert.equal('key' in shown, false);
    assert.equal(shown.machines_in_use, 1);
    const listed = (await api(serve.url, 'GET', '/api/licenses', { token: reader })).body;
    assert.deepEqual(listed.map((entry: Record<string, unknown>) => ['key' in entry, entry.key_prefix]), [[false, license.key_prefix]]);
  });

  it('gives the key to a token with licenses (and read), and to admin', async () => {
    const provisioner = await token(`provisioner-${fixture.engine}`, ['read', 'licenses']);
    for (const bearer of [provisioner, admin]) {
      assert.equal((await api(serve.url, 'GET', `/api/licenses/${license.id}`, { token: bearer })).body.key, license.key);
      assert.equal((await api(serve.url, 'GET', '/api/licenses', { token: bearer })).body[0].key, license.key);
    }
    // What a licenses token changes comes back whole: it may see the key anyway.
    const changed = await api(serve.url, 'PATCH', `/api/licenses/${license.id}`, { token: provisioner, body: { max_machines: 3 } });
    assert.equal(changed.body.license.key, license.key);
  });
});
