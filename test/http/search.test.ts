import assert from 'node:assert/strict';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/** GET /api/search on a real serve: the groups, and what each scope sees of a license. */
forEachEngine('GET /api/search', (fixture) => {
  let serve: ServeProcess;
  let databaseUrl: string;
  let admin: string;
  let reader: string;
  let provisioner: string;
  let license: { id: string; key: string; key_prefix: string };
  let customerId: string;
  const token = async (name: string, scopes: string[]) =>
    ok(await runCli(['token', 'create', '--name', name, ...scopes.flatMap((scope) => ['--scope', scope]), '--json'], { env: { LICENSE_DATABASE_URL: databaseUrl } })).json();

  before(async () => {
    databaseUrl = await fixture.freshUrl();
    serve = await startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_CLIENT_RATE_LIMIT: '0' });
    admin = serve.token!;
    const call = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: admin, body });
    customerId = (await call('POST', '/api/customers', { name: 'Umbrella Pharmaceuticals', email: 'licensing@umbrella.example' })).body.id;
    license = (await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01' })).body;
    reader = (await token(`reader-${fixture.engine}`, ['read'])).token;
    provisioner = (await token(`provisioner-${fixture.engine}`, ['read', 'licenses'])).token;
  });
  after(async () => {
    await serve?.stop();
  });

  const find = (bearer: string, q: string, extra = '') => api(serve.url, 'GET', `/api/search?q=${encodeURIComponent(q)}${extra}`, { token: bearer });

  it('gives a read token key prefixes only, and matches a key no further than the prefix it sees', async () => {
    const typed = license.key.slice(0, 12).replace(/-/g, '').toLowerCase();
    const answer = await find(reader, typed);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.body.query, typed);
    assert.deepEqual(answer.body.licenses.items, [{
      id: license.id, key_prefix: license.key_prefix, customer_id: customerId, customer_name: 'Umbrella Pharmaceuticals',
      type: 'time_based', valid_until: '2099-01-02T00:00:00.000Z', active: true, matched: 'key_prefix',
    }]);
    assert.ok(!answer.text.includes(license.key) && !answer.text.includes(license.key.replace(/-/g, '')));
    // The eighth symbol and on are not looked at: a wrong one still finds the license, so
    // that whether it does tells a read token nothing beyond the prefix it is shown.
    const wrongEighth = `${license.key.slice(0, 8)}${license.key[8] === 'Z' ? 'Y' : 'Z'}`;
    assert.deepEqual((await find(reader, wrongEighth)).body.licenses.items.map((item: { id: string }) => item.id), [license.id]);
    assert.deepEqual((await find(provisioner, wrongEighth)).body.licenses.items, []);
    // Admin tokens are listed for admin alone.
    assert.equal('admin_tokens' in answer.body, false);
  });

  it('gives a licenses token and an admin token the whole key', async () => {
    for (const bearer of [provisioner, admin]) {
      const answer = await find(bearer, license.key.slice(0, 6));
      assert.equal(answer.status, 200, answer.text);
      assert.deepEqual(answer.body.licenses.items.map((item: { key: string; key_prefix: string }) => [item.key, item.key_prefix]), [[license.key, license.key_prefix]]);
    }
  });

  it('answers in groups, each with items and more', async () => {
    const answer = await find(admin, 'UMBRELLA.EX', '&limit=1');
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(Object.keys(answer.body), ['query', 'licenses', 'customers', 'machines', 'entitlements', 'admin_tokens', 'audit_entries', 'notification_deliveries']);
    assert.deepEqual(answer.body.customers, { items: [{ id: customerId, name: 'Umbrella Pharmaceuticals', email: 'licensing@umbrella.example', active: true, matched: 'email' }], more: false });
    const tokenId = (await token(`found-${fixture.engine}`, ['metrics'])).id;
    assert.deepEqual((await find(admin, tokenId)).body.admin_tokens.items.map((item: { id: string }) => item.id), [tokenId]);
  });

  it('refuses an empty or too long query, an unknown parameter and a bad limit with INVALID_INPUT', async () => {
    for (const route of ['/api/search', '/api/search?q=', '/api/search?q=%20%20', `/api/search?q=${'a'.repeat(201)}`, '/api/search?q=a&limit=0',
      '/api/search?q=a&limit=51', '/api/search?q=a&limit=x', '/api/search?q=a&q=b', '/api/search?q=a&kind=licenses']) {
      const answer = await api(serve.url, 'GET', route, { token: reader });
      assert.equal(answer.status, 400, `${route}: ${answer.text}`);
      assert.equal(answer.body.error.code, 'INVALID_INPUT', route);
    }
    assert.equal((await api(serve.url, 'GET', '/api/search?q=a')).status, 401);
    const metricsOnly = (await token(`metrics-${fixture.engine}`, ['metrics'])).token;
    assert.equal((await find(metricsOnly, 'a')).body.error.code, 'TOKEN_SCOPE');
  });
});
