import assert from 'node:assert/strict';
import { allRoutes } from '../../src/http/app.js';
import type { RouteDependencies } from '../../src/http/route-dependencies.js';
import { scopeAllows, type Scope } from '../../src/lib/admin-tokens.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { forEachEngine } from '../support/engines.js';
import { IN_PROCESS_ADMIN_TOKEN, startInProcessDaemon, type InProcessDaemon } from '../support/in-process-daemon.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const CONFIGURED = 'tokens-api-configured-token-0123456789';
const NIL = '00000000-0000-4000-8000-000000000000';
const DAY = 86_400_000;

/** Every admin route with its parameters filled by ids that name nothing. */
const adminRoutes = () =>
  allRoutes({} as RouteDependencies)
    .filter((route) => route.access === 'admin')
    .map((route) => ({ route, path: route.path.replace(':key_id', '0000000000000000').replace(':backup_id', 'none').replace(/:\w+/g, NIL) }));

forEachEngine('admin tokens over HTTP', (fixture) => {
  let serve: ServeProcess;
  let url: string;
  /** A stored admin token made through the API: the caller of most cases, so the audit names it. */
  let operator: string;
  const secrets: string[] = [];
  const as = (token: string, method: string, route: string, body?: unknown) => api(serve.url, method, route, { token, ...(body === undefined ? {} : { body }) });
  const create = async (token: string, body: Record<string, unknown>) => {
    const answer = await as(token, 'POST', '/api/tokens', body);
    assert.equal(answer.status, 201, answer.text);
    secrets.push(answer.body.token);
    return answer.body as { id: string; name: string; token: string; scopes: string[]; expires_at: string | null; prefix: string; created_by: string; revoked_at: string | null; warnings: string[] };
  };
  const refused = (answer: { status: number; body: any; text: string }, status: number, code: string) => {
    assert.equal(answer.status, status, answer.text);
    assert.equal(answer.body.error.code, code, answer.text);
  };

  before(async () => {
    url = await fixture.freshUrl();
    serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_ADMIN_TOKEN: CONFIGURED, LICENSE_CLIENT_RATE_LIMIT: '0' });
    operator = (await create(CONFIGURED, { name: 'operator', scopes: ['admin'] })).token;
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
  });

  it('creates a token with scopes and an expiry, shows its secret once, and audits it under the caller', async () => {
    const started = Date.now();
    const made = await create(operator, { name: 'support-desk', scopes: ['licenses', 'read'], expires_in: '90d' });
    assert.match(made.token, /^lsat_[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(made.scopes, ['read', 'licenses']);
    assert.equal(made.created_by, 'token:operator');
    assert.equal(made.prefix, made.token.slice(0, 11));
    assert.equal(made.revoked_at, null);
    assert.deepEqual(made.warnings, []);
    const expires = Date.parse(made.expires_at!);
    assert.ok(expires >= started + 90 * DAY && expires <= Date.now() + 90 * DAY, made.expires_at!);

    const shown = await as(operator, 'GET', `/api/tokens/${made.id}`);
    assert.equal(shown.status, 200, shown.text);
    const { token: _secret, ...record } = made;
    assert.deepEqual(shown.body, { ...record, last_used_at: null });
    const listed = await as(operator, 'GET', '/api/tokens');
    assert.ok(listed.body.some((token: { id: string }) => token.id === made.id));
    for (const answer of [shown, listed]) assert.ok(!answer.text.includes(made.token), 'the secret is shown only once');

    const audit = await as(operator, 'GET', `/api/audit?entity_type=admin_token&entity_id=${made.id}`);
    assert.deepEqual(
      audit.body.map(({ action, actor, details }: { action: string; actor: string; details: unknown }) => ({ action, actor, details })),
      [{ action: 'token.created', actor: 'token:operator', details: { name: 'support-desk', scopes: ['read', 'licenses'], expires_at: made.expires_at } }],
    );
  });

  it('gives the new secret exactly its scopes: 403 TOKEN_SCOPE on every route they do not cover', async () => {
    const scopes: Scope[] = ['read', 'backups'];
    const made = await create(operator, { name: 'reader-backups', scopes });
    const whoami = (await as(made.token, 'GET', '/api/whoami')).body;
    assert.deepEqual([whoami.actor, whoami.scopes], ['token:reader-backups', scopes]);
    assert.ok(whoami.routes.includes('GET /api/licenses') && whoami.routes.includes('POST /api/backups'), 'its routes are listed');
    assert.ok(!whoami.routes.includes('POST /api/tokens') && !whoami.routes.includes('POST /api/licenses'), 'no route of a scope it lacks');
    assert.equal((await as(made.token, 'GET', '/api/customers')).status, 200);
    assert.equal((await as(made.token, 'GET', '/api/backups/status')).status, 200);
    const forbidden = adminRoutes().filter(({ route }) => route.scope !== 'any' && !scopeAllows(scopes, route.scope ?? 'admin'));
    assert.ok(forbidden.some(({ route }) => route.path === '/api/customers' && route.method === 'POST'));
    for (const { route, path } of forbidden) {
      const answer = await as(made.token, route.method, path, route.method === 'GET' ? undefined : {});
      assert.equal(answer.status, 403, `${route.method} ${path}: ${answer.text}`);
      assert.equal(answer.body.error.code, 'TOKEN_SCOPE', `${route.method} ${path}`);
    }
  });

  it('refuses every token route to a token without admin, whatever else it may do', async () => {
    const routes = adminRoutes().filter(({ route }) => route.path.startsWith('/api/tokens'));
    assert.equal(routes.length, 4);
    const others = await create(operator, { name: 'all-but-admin', scopes: ['read', 'licenses', 'backups', 'restore', 'metrics'] });
    const before = (await as(operator, 'GET', '/api/tokens?include_revoked=true')).body.length;
    for (const scope of ['read', 'licenses', 'backups'] as const) {
      const token = (await create(operator, { name: `only-${scope}`, scopes: [scope] })).token;
      for (const caller of [token, others.token]) {
        for (const { route, path } of routes) {
          const target = path.replace(NIL, others.id);
          refused(await as(caller, route.method, target, route.method === 'GET' ? undefined : route.path === '/api/tokens' ? { name: `minted-by-${scope}`, scopes: ['read'] } : {}), 403, 'TOKEN_SCOPE');
        }
      }
    }
    const after = (await as(operator, 'GET', '/api/tokens?include_revoked=true')).body;
    assert.equal(after.length, before + 3, 'only the three tokens made by the operator');
    assert.equal(after.find((token: { id: string }) => token.id === others.id).revoked_at, null);
  });

  it('revokes: the secret stops working at once, the revocation is audited under the caller, and a second one changes nothing', async () => {
    const made = await create(operator, { name: 'to-revoke', scopes: ['read'] });
    assert.equal((await as(made.token, 'GET', '/api/licenses')).status, 200);
    const revoked = await as(operator, 'POST', `/api/tokens/${made.id}/revoke`);
    assert.equal(revoked.status, 200, revoked.text);
    assert.equal(revoked.body.id, made.id);
    assert.ok(revoked.body.revoked_at);
    const after = await as(made.token, 'GET', '/api/licenses');
    refused(after, 401, 'UNAUTHORIZED');
    assert.ok(!after.text.includes(made.token));
    const again = await as(operator, 'POST', `/api/tokens/${made.id}/revoke`, {});
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.revoked_at, revoked.body.revoked_at);
    const audit = await as(operator, 'GET', `/api/audit?entity_type=admin_token&entity_id=${made.id}`);
    assert.deepEqual(audit.body.map(({ action, actor }: { action: string; actor: string }) => `${action} ${actor}`), ['token.revoked token:operator', 'token.created token:operator']);
    // Names are never reused, revoked ones' included.
    refused(await as(operator, 'POST', '/api/tokens', { name: 'TO-REVOKE', scopes: ['read'] }), 409, 'TOKEN_NAME_EXISTS');
  });

  it('does not let a token revoke itself by accident, and never the configured token', async () => {
    const self = await create(operator, { name: 'self-cleaner', scopes: ['admin'] });
    const refusal = await as(self.token, 'POST', `/api/tokens/${self.id}/revoke`);
    refused(refusal, 422, 'TOKEN_SELF_REVOKE');
    assert.match(refusal.body.error.message, /self-cleaner/);
    assert.equal((await as(self.token, 'GET', `/api/tokens/${self.id}`)).body.revoked_at, null, 'nothing changed');
    refused(await as(self.token, 'POST', `/api/tokens/${self.id}/revoke`, { allow_self: 'yes' }), 400, 'INVALID_INPUT');
    const revoked = await as(self.token, 'POST', `/api/tokens/${self.id}/revoke`, { allow_self: true });
    assert.equal(revoked.status, 200, revoked.text);
    refused(await as(self.token, 'GET', '/api/whoami'), 401, 'UNAUTHORIZED');
    // Another admin token revokes without allow_self.
    const other = await create(CONFIGURED, { name: 'revoked-by-config', scopes: ['read'] });
    assert.equal((await as(CONFIGURED, 'POST', `/api/tokens/${other.id}/revoke`)).status, 200);

    for (const [method, path] of [['GET', '/api/tokens/config:admin_token'], ['POST', '/api/tokens/config:admin_token/revoke']] as const) {
      refused(await as(CONFIGURED, method, path, method === 'POST' ? {} : undefined), 422, 'TOKEN_IN_CONFIGURATION');
    }
    assert.ok(!(await as(operator, 'GET', '/api/tokens?include_revoked=true')).body.some((token: { name: string }) => token.name.startsWith('config')));
    const whoami = (await as(CONFIGURED, 'GET', '/api/whoami')).body;
    assert.deepEqual([whoami.actor, whoami.scopes, whoami.routes.includes('POST /api/tokens/{id}/revoke')], ['config:admin_token', ['admin'], true]);
  });

  it('lists one page at a time, live tokens or with the revoked ones', async () => {
    const all = (await as(operator, 'GET', '/api/tokens?include_revoked=true')).body as Array<{ id: string; revoked_at: string | null; created_at: string }>;
    const live = (await as(operator, 'GET', '/api/tokens?include_revoked=false')).body as Array<{ id: string }>;
    assert.ok(all.length >= 10 && live.length < all.length, `${all.length} tokens, ${live.length} live`);
    assert.deepEqual(live.map((token) => token.id), all.filter((token) => token.revoked_at === null).map((token) => token.id));
    assert.deepEqual((await as(operator, 'GET', '/api/tokens')).body.map((token: { id: string }) => token.id), live.map((token) => token.id));
    assert.deepEqual(all.map((token) => token.created_at), all.map((token) => token.created_at).sort(), 'oldest first');
    for (const [query, expected] of [['include_revoked=true&limit=3', all], ['limit=2', live]] as const) {
      const seen: string[] = [];
      let next: string | undefined = `/api/tokens?${query}`;
      while (next) {
        const page = await as(operator, 'GET', next);
        assert.equal(page.status, 200, page.text);
        assert.ok(page.body.length <= Number(/limit=(\d)/.exec(query)![1]));
        seen.push(...page.body.map((token: { id: string }) => token.id));
        const link = page.headers.get('link');
        if (link && query.includes('include_revoked')) assert.match(link, /include_revoked=true/);
        next = link ? /^<([^>]+)>; rel="next"$/.exec(link)![1] : undefined;
      }
      assert.deepEqual(seen, expected.map((token) => token.id), query);
    }
    refused(await as(operator, 'GET', '/api/tokens?include_revoked=yes'), 400, 'INVALID_INPUT');
    refused(await as(operator, 'GET', '/api/tokens?revoked=true'), 400, 'INVALID_INPUT');
    refused(await as(operator, 'GET', '/api/tokens?limit=2&cursor=bogus'), 400, 'INVALID_INPUT');
  });

  it('refuses bad input with stable codes and makes no token', async () => {
    const count = async () => (await as(operator, 'GET', '/api/tokens?include_revoked=true&limit=1000')).body.length;
    const before = await count();
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ name: 'x', scopes: ['owner'] }, 400, 'INVALID_SCOPE'],
      [{ name: 'x', scopes: [] }, 400, 'INVALID_SCOPE'],
      [{ name: 'x', scopes: 'read' }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: [1] }, 400, 'INVALID_INPUT'],
      [{ name: 'x' }, 400, 'INVALID_INPUT'],
      [{ scopes: ['read'] }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: ['read'], ttl: '1d' }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: ['read'], expires_at: '2030-01-01' }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: ['read'], expires_in: '90 days' }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: ['read'], expires_in: '0d' }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: ['read'], expires_in: '101y' }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: ['read'], expires_in: 90 }, 400, 'INVALID_INPUT'],
      [{ name: 'x', scopes: ['read'], expires_in: null }, 400, 'INVALID_INPUT'],
      [{ name: '', scopes: ['read'] }, 400, 'INVALID_INPUT'],
      [{ name: 'n'.repeat(101), scopes: ['read'] }, 400, 'INVALID_INPUT'],
      [{ name: 'boot\u200bstrap', scopes: ['read'] }, 400, 'INVALID_INPUT'],
      [{ name: 'support-desk', scopes: ['read'] }, 409, 'TOKEN_NAME_EXISTS'],
      [{ name: 'Support-Desk', scopes: ['read'] }, 409, 'TOKEN_NAME_EXISTS'],
    ];
    for (const [body, status, code] of cases) {
      const answer = await as(operator, 'POST', '/api/tokens', body);
      assert.equal(answer.status, status, `${JSON.stringify(body)}: ${answer.text}`);
      assert.equal(answer.body.error.code, code, `${JSON.stringify(body)}: ${answer.text}`);
    }
    // A secret sent where it does not belong is not echoed.
    const echoed = await as(operator, 'POST', '/api/tokens', { name: 'x', scopes: ['read'], expires_in: operator });
    refused(echoed, 400, 'INVALID_INPUT');
    assert.ok(!echoed.text.includes(operator.slice(5)), echoed.text);
    refused(await as(operator, 'GET', '/api/tokens/not-a-uuid'), 400, 'INVALID_ID');
    refused(await as(operator, 'GET', `/api/tokens/${NIL}`), 404, 'TOKEN_NOT_FOUND');
    refused(await as(operator, 'POST', `/api/tokens/${NIL}/revoke`), 404, 'TOKEN_NOT_FOUND');
    refused(await as(operator, 'POST', '/api/tokens/support-desk/revoke'), 400, 'INVALID_ID');
    refused(await as(operator, 'POST', `/api/tokens/${NIL}/revoke`, { force: true }), 400, 'INVALID_INPUT');
    assert.equal(await count(), before, 'no token was made');
  });

  it('warns about names an older store let clash by case, on every answer that shows the token', async () => {
    const made = await create(operator, { name: 'legacy-one', scopes: ['read'] });
    const other = await create(operator, { name: 'legacy-two', scopes: ['read'] });
    const db = await openDatabase(url);
    try {
      // As an older release let them be named.
      await db.execute('UPDATE admin_tokens SET name = ? WHERE id = ?', ['Legacy', made.id]);
      await db.execute('UPDATE admin_tokens SET name = ? WHERE id = ?', ['legacy', other.id]);
    } finally {
      await db.close();
    }
    const shown = (await as(operator, 'GET', `/api/tokens/${made.id}`)).body;
    assert.equal(shown.warnings.length, 1);
    assert.match(shown.warnings[0], new RegExp(`differs only by case from "legacy" \\(${other.id}\\)`));
    const listed = (await as(operator, 'GET', '/api/tokens?limit=1000')).body as Array<{ id: string; warnings: string[] }>;
    assert.deepEqual(listed.filter((token) => token.warnings.length > 0).map((token) => token.id).sort(), [made.id, other.id].sort());
    // Both keep working under their exact names, and each is revoked by its id.
    assert.equal((await as(made.token, 'GET', '/api/whoami')).body.actor, 'token:Legacy');
    assert.equal((await as(operator, 'POST', `/api/tokens/${other.id}/revoke`)).body.name, 'legacy');
    assert.equal((await as(made.token, 'GET', '/api/whoami')).status, 200);
  });

  it('keeps every secret out of the audit log, the stored tokens and the daemon\'s log', async () => {
    assert.ok(secrets.length >= 10, `${secrets.length} secrets`);
    const audit = await as(operator, 'GET', '/api/audit?limit=1000');
    assert.equal(audit.status, 200);
    assert.ok(audit.body.some((entry: { action: string }) => entry.action === 'token.created'));
    const db = await openDatabase(url);
    let stored: string;
    try {
      stored = JSON.stringify(await db.query('SELECT * FROM admin_tokens')) + JSON.stringify(await db.query('SELECT * FROM audit_log'));
    } finally {
      await db.close();
    }
    const log = serve.stdout() + serve.stderr();
    assert.ok(log.includes('"route":"POST /api/tokens"') && log.includes('"actor":"token:operator"'), 'the log has the requests');
    for (const secret of secrets) {
      // The part after the shown prefix: what would make the secret usable.
      const hidden = secret.slice(11);
      assert.ok(!audit.text.includes(hidden), 'a secret in the audit log');
      assert.ok(!stored.includes(hidden), 'a secret in the store');
      assert.ok(!log.includes(hidden), "a secret in the daemon's log");
    }
  });
});

forEachEngine('admin tokens over HTTP, as time passes', (fixture) => {
  let daemon: InProcessDaemon | undefined;
  let time = Date.parse('2031-03-01T12:00:00.000Z');
  const clock = () => new Date(time);
  after(async () => daemon?.stop());

  it('a token made with expires_in works until then and is TOKEN_EXPIRED after, still listed until revoked', async () => {
    daemon = await startInProcessDaemon(await fixture.freshUrl(), clock);
    const as = (token: string, method: string, route: string, body?: unknown) => api(daemon!.url, method, route, { token, ...(body === undefined ? {} : { body }) });
    const made = await as(IN_PROCESS_ADMIN_TOKEN, 'POST', '/api/tokens', { name: 'day-pass', scopes: ['read'], expires_in: '36h' });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.expires_at, '2031-03-03T00:00:00.000Z');
    assert.equal(made.body.created_by, 'config:admin_token');
    time += 36 * 3_600_000 - 1;
    assert.equal((await as(made.body.token, 'GET', '/api/licenses')).status, 200);
    time += 1;
    const expired = await as(made.body.token, 'GET', '/api/licenses');
    assert.equal(expired.status, 401, expired.text);
    assert.equal(expired.body.error.code, 'TOKEN_EXPIRED');
    assert.ok(!expired.text.includes(made.body.token));
    const listed = (await as(IN_PROCESS_ADMIN_TOKEN, 'GET', '/api/tokens')).body;
    assert.deepEqual(listed.map((token: { name: string }) => token.name), ['day-pass']);
    assert.equal((await as(IN_PROCESS_ADMIN_TOKEN, 'POST', `/api/tokens/${made.body.id}/revoke`)).status, 200);
    assert.deepEqual((await as(IN_PROCESS_ADMIN_TOKEN, 'GET', '/api/tokens')).body, []);
  });
});
