import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/** JSON texts of values built to hurt: deep, wide, long and full of escapes. All fit in 1 MiB. */
const HOSTILE: Record<string, { json: string; kind: 'deep' | 'string' | 'other' }> = {
  'arrays 5000 deep': { json: `${'['.repeat(5000)}${']'.repeat(5000)}`, kind: 'deep' },
  'arrays 100000 deep': { json: `${'['.repeat(100_000)}${']'.repeat(100_000)}`, kind: 'deep' },
  'objects 100000 deep': { json: `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`, kind: 'deep' },
  'arrays 20 deep': { json: `${'['.repeat(20)}1${']'.repeat(20)}`, kind: 'other' },
  'an array of 200000 elements': { json: `[${new Array(200_000).fill('12').join(',')}]`, kind: 'other' },
  'an object of 50000 members': { json: `{${Array.from({ length: 50_000 }, (_, i) => `"k${i}":${i}`).join(',')}}`, kind: 'other' },
  'a string of 900000 characters': { json: JSON.stringify('a long value, '.repeat(64_000)), kind: 'string' },
  'a string of escapes': { json: JSON.stringify('"\\\u0000\u001b[2J\u202e\ud800'.repeat(30_000)), kind: 'string' },
  'a number too large': { json: '1e999', kind: 'other' },
};

interface Field {
  readonly name: string;
  /** The code when the value is not a string / is a string (deep values are INVALID_JSON). */
  readonly other: string;
  readonly string: string;
  /** A string answer that is not a 400, such as the client routes' authoritative "invalid". */
  readonly stringStatus?: number;
}

describe('hostile values in request bodies', function () {
  this.timeout(180_000);
  let serve: ServeProcess;
  let dir: string;
  let token: string;
  const routes: Array<{ path: string; base: Record<string, unknown>; fields: Field[]; client?: boolean }> = [];

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-hostile-'));
    serve = await startServe({ LICENSE_DATABASE_URL: path.join(dir, 'data', 'db.sqlite'), LICENSE_BACKUP_PATH: path.join(dir, 'backups'), LICENSE_CLIENT_RATE_LIMIT: '0' });
    token = serve.token!;
    const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Hostile' } })).body;
    await api(serve.url, 'POST', '/api/entitlements', { token, body: { code: 'seats', name: 'Seats' } });
    const license = (await api(serve.url, 'POST', '/api/licenses', {
      token,
      body: { customer_id: customer.id, type: 'hybrid', valid_until: '2099-01-01', entitlements: [{ code: 'seats', usage_limit: 10 }] },
    })).body;
    const backup = (await api(serve.url, 'POST', '/api/backups', { token })).body;
    const issued = (await api(serve.url, 'POST', '/api/tokens', { token, body: { name: 'hostile-target', scopes: ['read'] } })).body;
    const input = (name: string, other = 'INVALID_INPUT', string = other): Field => ({ name, other, string });
    routes.push(
      {
        path: `/api/licenses/${license.id}/checkout`,
        base: { ttl_days: 10, hardware_id: 'hw' },
        fields: [input('ttl_days', 'INVALID_TTL_DAYS'), input('hardware_id', 'INVALID_HARDWARE_ID')],
      },
      { path: '/api/customers', base: { name: 'Fine' }, fields: [input('name')] },
      { path: '/api/entitlements', base: { code: 'fine', name: 'Fine' }, fields: [input('code', 'INVALID_INPUT', 'INVALID_ENTITLEMENT_CODE'), input('name')] },
      {
        path: '/api/licenses',
        base: { customer_id: customer.id, type: 'hybrid', valid_until: '2099-01-01', valid_from: '2025-01-01', entitlements: [], with_decryption_key: false },
        fields: [
          input('customer_id', 'INVALID_INPUT', 'INVALID_ID'),
          input('type', 'INVALID_INPUT', 'INVALID_LICENSE_TYPE'),
          input('valid_until', 'INVALID_INPUT', 'INVALID_DATE'),
          input('valid_from', 'INVALID_INPUT', 'INVALID_DATE'),
          input('entitlements'),
          input('with_decryption_key'),
        ],
      },
      ...[`/api/customers/${customer.id}/activate`, `/api/customers/${customer.id}/deactivate`, `/api/licenses/${license.id}/activate`, `/api/licenses/${license.id}/deactivate`, '/api/backups', `/api/backups/${backup.backup_id}/validate`].map((route) => ({
        path: route,
        base: {},
        // These take no members: any member is refused, whatever its value.
        fields: [input('unexpected')],
      })),
      { path: `/api/backups/${backup.backup_id}/restore`, base: {}, fields: [input('confirm', 'RESTORE_NOT_CONFIRMED')] },
      { path: '/api/tokens', base: { name: 'never-made', scopes: ['read'], expires_in: '30d' }, fields: [input('name'), input('scopes'), input('expires_in')] },
      { path: `/api/tokens/${issued.id}/revoke`, base: {}, fields: [input('allow_self')] },
      {
        path: '/api/v1/validate',
        client: true,
        base: { license_key: license.key, hardware_id: 'hw', version: '1.0.0' },
        fields: [{ ...input('license_key'), stringStatus: 200 }, input('hardware_id', 'INVALID_HARDWARE_ID'), input('version')],
      },
      {
        path: '/api/v1/usage',
        client: true,
        base: { license_key: license.key, hardware_id: 'hw', entitlement_code: 'seats', quantity: 1, occurred_at: '2025-06-01T00:00:00Z', idempotency_key: 'k1' },
        fields: [
          { ...input('license_key', 'INVALID_INPUT', 'LICENSE_NOT_FOUND'), stringStatus: 404 },
          input('hardware_id', 'INVALID_HARDWARE_ID'),
          input('entitlement_code', 'INVALID_INPUT', 'INVALID_ENTITLEMENT_CODE'),
          input('quantity'),
          input('occurred_at', 'INVALID_INPUT', 'INVALID_DATE'),
          input('idempotency_key'),
        ],
      },
    );
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('are refused on every route that takes a body with 400 and the right code, a short message, and no 500', async () => {
    const failures: string[] = [];
    let sent = 0;
    for (const route of routes) {
      for (const field of route.fields) {
        for (const [label, value] of Object.entries(HOSTILE)) {
          const others = Object.entries(route.base).filter(([name]) => name !== field.name).map(([name, v]) => `${JSON.stringify(name)}:${JSON.stringify(v)}`);
          const raw = `{${[...others, `${JSON.stringify(field.name)}:${value.json}`].join(',')}}`;
          assert.ok(raw.length <= 1024 * 1024, `${label} fits the body limit`);
          const result = await api(serve.url, 'POST', route.path, { token: route.client ? undefined : token, raw, headers: { 'content-type': 'application/json' } });
          sent += 1;
          const expected = value.kind === 'deep'
            ? { status: 400, code: 'INVALID_JSON' }
            : { status: value.kind === 'string' ? field.stringStatus ?? 400 : 400, code: value.kind === 'string' ? field.string : field.other };
          const where = `${route.path} ${field.name} = ${label}`;
          if (result.status !== expected.status) failures.push(`${where}: ${result.status} ${result.text.slice(0, 200)}`);
          else if (expected.status !== 200 && result.body?.error?.code !== expected.code) failures.push(`${where}: ${result.text.slice(0, 200)}`);
          else if (Buffer.byteLength(result.text) > 300) failures.push(`${where}: an answer of ${Buffer.byteLength(result.text)} bytes: ${result.text.slice(0, 200)}...`);
          else if (expected.status !== 200 && Buffer.byteLength(result.body.error.message) > 200) failures.push(`${where}: message of ${Buffer.byteLength(result.body.error.message)} bytes`);
        }
      }
    }
    assert.deepEqual(failures, [], `${failures.length} of ${sent} answers were wrong`);
    assert.ok(!serve.stderr().includes('"msg":"unhandled error"'), 'no request reached the bug handler');
    assert.deepEqual((await api(serve.url, 'GET', '/readyz')).body, { status: 'ready' }, 'the daemon keeps serving');
  });

  it('never echoes more than a short prefix of a hostile member name or header', async () => {
    const longName = `{${JSON.stringify('n'.repeat(500_000))}:1}`;
    const unknown = await api(serve.url, 'POST', '/api/customers', { token, raw: longName, headers: { 'content-type': 'application/json' } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.error.code, 'INVALID_INPUT');
    assert.ok(unknown.text.length < 300, unknown.text.slice(0, 300));
    const query = await api(serve.url, 'GET', `/api/customers?${'q'.repeat(4000)}=1`, { token });
    assert.equal(query.status, 400);
    assert.ok(query.text.length < 300, query.text.slice(0, 300));
    const type = await api(serve.url, 'POST', '/api/customers', { token, raw: '{}', headers: { 'content-type': `text/${'x'.repeat(8000)}` } });
    assert.equal(type.status, 415);
    assert.ok(type.text.length < 300, type.text.slice(0, 300));
  });
});
