import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as jose from 'jose';
import { unsealDecryptionKey } from '../../src/lib/offline/binding.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { verifyGraceToken } from '../../src/lib/licensing/grace-token.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { forEachEngine } from '../support/engines.js';
import { api, rawRequest, startServe, type ServeProcess } from '../support/serve.js';

const httpDoc = readFileSync(new URL('../../docs/http-api.md', import.meta.url), 'utf8');

forEachEngine('HTTP API against a real serve process', (fixture) => {
  let serve: ServeProcess;
  let url: string;
  let token: string;
  let databaseUrl: string;
  const seenCodes = new Set<string>();
  const call = async (method: string, route: string, options: Parameters<typeof api>[3] = {}) => {
    const result = await api(url, method, route, { token, ...options });
    if (result.body?.error?.code) seenCodes.add(result.body.error.code);
    assert.notEqual(result.status, 500, `${method} ${route}: ${result.text}`);
    return result;
  };
  const expectError = async (promise: ReturnType<typeof call>, status: number, code: string) => {
    const result = await promise;
    assert.equal(result.status, status, result.text);
    assert.deepEqual(Object.keys(result.body), ['error']);
    assert.equal(result.body.error.code, code, result.text);
    assert.equal(typeof result.body.error.message, 'string');
    return result;
  };

  let customer: any;
  let keyed: any;
  let metered: any;

  before(async () => {
    databaseUrl = await fixture.freshUrl();
    serve = await startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_ISSUER: 'licenses.example.com', LICENSE_CLIENT_RATE_LIMIT: '0' });
    url = serve.url;
    assert.ok(serve.token, 'the first start prints a bootstrap admin token');
    token = serve.token!;
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
  });

  it('answers /healthz and /readyz without a token', async () => {
    assert.deepEqual((await api(url, 'GET', '/healthz')).body, { status: 'ok' });
    assert.deepEqual((await api(url, 'GET', '/readyz')).body, { status: 'ready' });
  });

  it('refuses admin routes without a valid bearer token (401 + WWW-Authenticate)', async () => {
    for (const headers of [{} as Record<string, string>, { authorization: 'Basic abc' }, { authorization: 'Bearer' }, { authorization: 'Bearer lsat_wrong' }]) {
      const result = await expectError(call('GET', '/api/signing-key', { token: undefined as never, headers }), 401, 'UNAUTHORIZED');
      assert.equal(result.headers.get('www-authenticate'), 'Bearer');
    }
  });

  it('serves the public signing key as PEM, with its key id', async () => {
    const { body } = await call('GET', '/api/signing-key');
    assert.match(body.public_key_pem, /^-----BEGIN PUBLIC KEY-----\n/);
    assert.deepEqual(Object.keys(body), ['public_key_pem', 'key_id']);
    // Every document that shows this answer names exactly these members.
    for (const file of ['docs/http-api.md', 'README.md', 'docs/offline-license-format.md']) {
      const text = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
      const shown = /api\/signing-key\b[^{\n]*\n?[^{\n]*(\{[^}]*\})/.exec(text);
      assert.ok(shown, `${file} shows the answer of GET /api/signing-key`);
      assert.deepEqual([...shown[1]!.matchAll(/"([a-z_]+)":/g)].map((m) => m[1]), Object.keys(body), file);
    }
    const set = (await call('GET', '/api/signing-keys')).body;
    assert.equal(set.active_key_id, body.key_id);
    assert.equal(set.keys[0].public_key_pem, body.public_key_pem);
  });

  it('creates, reads, lists and (de)activates customers, entitlements and licenses', async () => {
    customer = (await call('POST', '/api/customers', { body: { name: 'Wayne <Enterprises> & "Sons"' } })).body;
    assert.equal(customer.active, true);
    const summary = (await call('GET', `/api/customers/${customer.id}`)).body;
    assert.deepEqual({ ...summary, licenses: undefined, active_licenses: undefined, machines_in_use: undefined, entitlements: undefined }, { ...customer, licenses: undefined, active_licenses: undefined, machines_in_use: undefined, entitlements: undefined });
    assert.deepEqual([summary.licenses, summary.machines_in_use, summary.entitlements], [0, 0, []]);
    assert.equal((await call('GET', '/api/customers?active=true')).body.length, 1);
    for (const [code, name] of [['seats', 'Seats'], ['export', 'Export']]) {
      assert.equal((await call('POST', '/api/entitlements', { body: { code, name } })).status, 201);
    }
    await expectError(call('POST', '/api/entitlements', { body: { code: 'seats', name: 'Again' } }), 409, 'ENTITLEMENT_CODE_EXISTS');
    assert.deepEqual((await call('GET', '/api/entitlements')).body.map((e: any) => e.code), ['export', 'seats']);

    const created = await call('POST', '/api/licenses', {
      body: { customer_id: customer.id, type: 'hybrid', valid_until: '2099-12-31', entitlements: [{ code: 'export' }], with_decryption_key: true },
    });
    assert.equal(created.status, 201);
    keyed = created.body;
    metered = (await call('POST', '/api/licenses', {
      body: { customer_id: customer.id, type: 'usage_based', valid_from: '2025-01-01', valid_until: '2099-12-31', entitlements: [{ code: 'seats', usage_limit: 10 }, { code: 'export', usage_limit: null }] },
    })).body;
    assert.deepEqual((await call('GET', `/api/licenses/${keyed.id}`)).body, { ...keyed, recent_checkouts: [] });
    assert.deepEqual((await call('GET', `/api/licenses?customer_id=${customer.id}&type=usage_based`)).body.map((l: any) => l.id), [metered.id]);
    assert.equal((await call('POST', `/api/licenses/${keyed.id}/deactivate`)).body.active, false);
    assert.equal((await call('POST', `/api/licenses/${keyed.id}/activate`)).body.active, true);
    assert.equal((await call('POST', `/api/customers/${customer.id}/deactivate`)).body.active, false);
    assert.equal((await call('POST', `/api/customers/${customer.id}/activate`)).body.active, true);

    const audit = (await call('GET', `/api/audit?entity_id=${keyed.id}`)).body;
    assert.deepEqual(audit.map((e: any) => e.action), ['license.activated', 'license.deactivated', 'license.created']);
    assert.ok(audit.every((e: any) => e.actor === 'token:bootstrap'));
  });

  it('checks out a license as JSON and as raw .lic bytes', async () => {
    const pem = (await call('GET', '/api/signing-key')).body.public_key_pem;
    const json = await call('POST', `/api/licenses/${keyed.id}/checkout`, { body: { ttl_days: 30, hardware_id: 'machine-A' } });
    assert.equal(json.status, 200);
    assert.deepEqual(Object.keys(json.body).sort(), ['filename', 'license_file', 'valid_until']);
    const verified = verifyLicenseFile(json.body.license_file, { publicKey: pem, hardwareId: 'machine-A' });
    assert.equal(verified.payload.issuer, 'licenses.example.com');

    const raw = await fetch(`${url}/api/licenses/${keyed.id}/checkout`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/octet-stream' },
      body: JSON.stringify({ ttl_days: 5, hardware_id: 'machine-A' }),
    });
    assert.equal(raw.status, 200);
    assert.equal(raw.headers.get('content-type'), 'application/octet-stream');
    assert.match(raw.headers.get('content-disposition')!, /^attachment; filename="license-[0-9A-Z-]+-\d{8}T\d{6}Z\.lic"$/);
    assert.ok(verifyLicenseFile(await raw.text(), { publicKey: pem, hardwareId: 'machine-A' }));

    await expectError(call('POST', `/api/licenses/${keyed.id}/checkout`, { body: { ttl_days: 30 } }), 422, 'HARDWARE_ID_REQUIRED');
    for (const ttl_days of [0, 366, -1, 1.5, '30', null]) {
      await expectError(call('POST', `/api/licenses/${keyed.id}/checkout`, { body: { ttl_days, hardware_id: 'm' } }), 400, 'INVALID_TTL_DAYS');
    }
    await expectError(call('POST', `/api/licenses/${keyed.id}/checkout`, { body: { hardware_id: 'm' } }), 400, 'INVALID_INPUT');
    await expectError(call('POST', `/api/licenses/${keyed.id}/checkout`, { body: { ttl_days: 3, hardware_id: '' } }), 400, 'INVALID_HARDWARE_ID');
    assert.equal((await call('GET', `/api/audit?action=license.checked_out`)).body.length, 2);
  });

  it('validates online with a grace token that jose verifies with the PEM alone', async () => {
    const pem = (await call('GET', '/api/signing-key')).body.public_key_pem;
    const answer = (await call('POST', '/api/v1/validate', { token: undefined as never, body: { license_key: keyed.key, hardware_id: 'machine-A', version: '2.1.0' } })).body;
    assert.equal(answer.valid, true);
    assert.equal(answer.license_id, keyed.id);
    assert.equal(answer.license_type, 'hybrid');
    assert.deepEqual(answer.entitlements, [{ code: 'export', name: 'Export', usage_limit: null }]);

    const db = await openDatabase(databaseUrl);
    try {
      const [row] = await db.query<{ decryption_key: Buffer }>('SELECT decryption_key FROM licenses WHERE id = ?', [keyed.id]);
      assert.deepEqual(Buffer.from(unsealDecryptionKey(answer.encrypted_key, 'machine-A', keyed.id)), Buffer.from(row!.decryption_key));
    } finally {
      await db.close();
    }

    const key = await jose.importSPKI(pem, 'EdDSA');
    const { payload, protectedHeader } = await jose.jwtVerify(answer.grace_token, key, { issuer: 'licenses.example.com', subject: keyed.id });
    assert.equal(protectedHeader.alg, 'EdDSA');
    assert.equal(payload.license_id, keyed.id);
    assert.equal(payload.hardware_id, 'machine-A');
    assert.deepEqual(payload.entitlements, answer.entitlements);
    const hours = (payload.exp! - payload.iat!) / 3600;
    assert.equal(hours, 72);
    assert.equal(new Date(payload.exp! * 1000).toISOString(), answer.grace_expires_at);
    assert.ok(verifyGraceToken(answer.grace_token, pem, { hardwareId: 'machine-A' }));

    const [h, c, s] = answer.grace_token.split('.');
    const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 86_400 })).toString('base64url')}.${s}`;
    await assert.rejects(jose.jwtVerify(forged, key), /signature verification failed/);
    const flipped = `${h}.${c}.${s.startsWith('A') ? 'B' : 'A'}${s.slice(1)}`;
    await assert.rejects(jose.jwtVerify(flipped, key));
  });

  it('never lets a grace token outlive the license', async () => {
    const short = (await call('POST', '/api/licenses', { body: { customer_id: customer.id, type: 'time_based', valid_until: new Date(Date.now() + 3_600_000).toISOString() } })).body;
    const answer = (await call('POST', '/api/v1/validate', { body: { license_key: short.key, hardware_id: 'h', version: '1' } })).body;
    const claims = JSON.parse(Buffer.from(answer.grace_token.split('.')[1], 'base64url').toString());
    assert.equal(claims.exp, Math.floor(Date.parse(short.valid_until) / 1000));
  });

  it('gives an authoritative "invalid" with a reason, the same for malformed and unknown keys', async () => {
    const ask = async (license_key: string) => (await call('POST', '/api/v1/validate', { body: { license_key, hardware_id: 'h', version: '1' } }));
    const unknown = await ask('ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ');
    const malformed = await ask('definitely not a key');
    assert.equal(unknown.status, 200);
    assert.equal(malformed.status, 200);
    const strip = (body: any) => ({ ...body, server_time: undefined });
    assert.deepEqual(strip(unknown.body), strip(malformed.body));
    assert.deepEqual(strip(unknown.body), { valid: false, reason: 'LICENSE_NOT_FOUND', message: 'no license has this key', server_time: undefined });
    assert.equal((await ask(keyed.id)).body.reason, 'LICENSE_NOT_FOUND', 'an id is not a key');

    await call('POST', `/api/licenses/${keyed.id}/deactivate`);
    assert.equal((await ask(keyed.key)).body.reason, 'LICENSE_INACTIVE');
    await call('POST', `/api/licenses/${keyed.id}/activate`);
    await call('POST', `/api/customers/${customer.id}/deactivate`);
    assert.equal((await ask(keyed.key)).body.reason, 'CUSTOMER_INACTIVE');
    await call('POST', `/api/customers/${customer.id}/activate`);
    const db = await openDatabase(databaseUrl);
    try {
      await db.execute('UPDATE licenses SET valid_from = ?, valid_until = ? WHERE id = ?', ['2020-01-01T00:00:00.000Z', '2021-01-01T00:00:00.000Z', metered.id]);
      assert.equal((await ask(metered.key)).body.reason, 'LICENSE_EXPIRED');
      await db.execute('UPDATE licenses SET valid_from = ?, valid_until = ? WHERE id = ?', ['2025-01-01T00:00:00.000Z', '2099-12-31T23:59:59.000Z', metered.id]);
    } finally {
      await db.close();
    }
  });

  it('counts usage against the limit once per idempotency key', async () => {
    const report = (quantity: number, idempotency_key: string, entitlement_code = 'seats') =>
      call('POST', '/api/v1/usage', {
        body: { license_key: metered.key, hardware_id: 'h', entitlement_code, quantity, occurred_at: new Date().toISOString(), idempotency_key },
      });
    const first = await report(4, 'report-1');
    assert.equal(first.status, 201);
    assert.deepEqual(first.body, { replayed: false, entitlement_code: 'seats', quantity: 4, used: 4, usage_limit: 10, remaining: 6 });
    const replay = await report(4, 'report-1');
    assert.equal(replay.status, 200);
    assert.equal(replay.body.replayed, true);
    assert.equal(replay.body.used, 4, 'counted once');
    await expectError(report(5, 'report-1'), 409, 'IDEMPOTENCY_KEY_REUSED');
    await expectError(report(7, 'report-2'), 422, 'USAGE_LIMIT_EXCEEDED');
    assert.equal((await report(6, 'report-3')).body.remaining, 0);
    assert.equal((await report(1000, 'report-4', 'export')).body.remaining, null, 'no limit');
    await expectError(report(1, 'report-5', 'missing'), 404, 'ENTITLEMENT_NOT_FOUND');
    for (const quantity of [0, -1, 1.5]) await expectError(report(quantity, `q-${quantity}`), 400, 'INVALID_INPUT');
  });

  it('counts concurrent reports exactly up to the limit', async () => {
    const fresh = (await call('POST', '/api/licenses', { body: { customer_id: customer.id, type: 'usage_based', valid_until: '2099-12-31', entitlements: [{ code: 'seats', usage_limit: 25 }] } })).body;
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        api(url, 'POST', '/api/v1/usage', {
          body: { license_key: fresh.key, hardware_id: 'h', entitlement_code: 'seats', quantity: 1, occurred_at: new Date().toISOString(), idempotency_key: `c-${i}` },
        }),
      ),
    );
    assert.equal(results.filter((r) => r.status === 201).length, 25);
    assert.equal(results.filter((r) => r.status === 422).length, 15);
  });

  it('refuses bad requests with their status and the one error shape', async () => {
    await expectError(call('POST', '/api/customers', { raw: '{"name": ', headers: { 'content-type': 'application/json' } }), 400, 'INVALID_JSON');
    await expectError(call('POST', '/api/customers', { raw: '[1]', headers: { 'content-type': 'application/json' } }), 400, 'INVALID_JSON');
    await expectError(call('POST', '/api/customers', { raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    await expectError(call('POST', '/api/customers', { raw: `{"name":"${'x'.repeat(1024 * 1024)}"}`, headers: { 'content-type': 'application/json' } }), 413, 'BODY_TOO_LARGE');
    await expectError(call('POST', '/api/customers', { body: { name: 'A', colour: 'blue' } }), 400, 'INVALID_INPUT');
    await expectError(call('POST', '/api/customers', { body: { name: 42 } }), 400, 'INVALID_INPUT');
    await expectError(call('POST', '/api/customers', { body: {} }), 400, 'INVALID_INPUT');
    await expectError(call('GET', '/api/customers?limit=lots'), 400, 'INVALID_INPUT');
    await expectError(call('GET', '/api/customers?bogus=1'), 400, 'INVALID_INPUT');
    await expectError(call('GET', '/api/customers/not-a-uuid'), 400, 'INVALID_ID');
    // Paths are never normalised: a dot segment is refused wherever it is, also percent-encoded.
    for (const path of ['/api/customers/..', '/api/customers/..%2F..%2Fetc%2Fpasswd', '/api/licenses/../signing-key', '/api/licenses/../../signing-key/checkout',
      '/api/licenses/%2e%2e/signing-key', '/api/./signing-key', '/healthz/..', '/nothing/../healthz']) {
      const raw = await rawRequest(url, path.endsWith('checkout') ? 'POST' : 'GET', path, { headers: { authorization: `Bearer ${token}` } });
      if (raw.body?.error?.code) seenCodes.add(raw.body.error.code);
      assert.equal(raw.status, 400, `${path}: ${raw.text}`);
      assert.equal(raw.body.error.code, 'INVALID_ID', `${path}: ${raw.text}`);
    }
    const dotted = await rawRequest(url, 'POST', '/api/licenses/../checkout', {
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"ttl_days":1}',
    });
    assert.equal(dotted.status, 400);
    assert.equal(dotted.body.error.code, 'INVALID_ID');
    await expectError(call('GET', '/api/licenses/%E0%A4%A'), 400, 'INVALID_INPUT');
    await expectError(call('GET', '/api/customers/00000000-0000-4000-8000-000000000000'), 404, 'CUSTOMER_NOT_FOUND');
    await expectError(call('GET', `/api/licenses/${keyed.key}`), 400, 'INVALID_ID');
    await expectError(call('GET', '/api/nothing-here'), 404, 'ROUTE_NOT_FOUND');
    const wrongMethod = await expectError(call('DELETE', '/api/customers'), 405, 'METHOD_NOT_ALLOWED');
    assert.equal(wrongMethod.headers.get('allow'), 'GET, POST, HEAD');
    await expectError(call('GET', '/api/v1/validate'), 405, 'METHOD_NOT_ALLOWED');
    await expectError(call('POST', '/api/v1/validate', { body: { license_key: keyed.key, hardware_id: 'h' } }), 400, 'INVALID_INPUT');
    await expectError(call('POST', '/api/v1/validate', { body: { license_key: 7, hardware_id: 'h', version: '1' } }), 400, 'INVALID_INPUT');
  });

  it('logs one JSON line per request with id, method, route, status and duration, and no secrets', async () => {
    const lines = serve.stderr().trim().split('\n').map((line) => JSON.parse(line));
    const requests = lines.filter((line) => line.msg === 'request');
    assert.ok(requests.length > 50);
    for (const line of requests) {
      assert.match(line.request_id, /^[\w.-]+$/);
      assert.equal(typeof line.status, 'number');
      assert.equal(typeof line.duration_ms, 'number');
      assert.ok(line.route === 'unmatched' || /^(GET|POST) \//.test(line.route), line.route);
    }
    const everything = serve.stderr();
    for (const secret of [token, keyed.key, metered.key]) assert.ok(!everything.includes(secret), 'a secret reached the log');
    assert.ok(!serve.stdout().includes(keyed.key));
  });

  it('documents every error code it answered with', () => {
    for (const code of seenCodes) assert.ok(httpDoc.includes(`\`${code}\``), `docs/http-api.md lacks ${code}`);
  });
});
