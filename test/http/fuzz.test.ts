import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { api, rawRequest, startServe, type ServeProcess } from '../support/serve.js';
import { prng } from '../support/prng.js';

interface Template {
  method: string;
  path: string;
  admin: boolean;
  body?: Record<string, unknown>;
}

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 3000);

describe('fuzzing a running daemon', function () {
  this.timeout(180_000);
  let serve: ServeProcess;
  let dir: string;
  let templates: Template[];
  const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-fuzz-'));
    serve = await startServe({ LICENSE_DATABASE_URL: path.join(dir, 'fuzz.db'), LICENSE_CLIENT_RATE_LIMIT: '0', LICENSE_REQUEST_TIMEOUT: '5' });
    const token = serve.token!;
    const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Fuzz' } })).body;
    await api(serve.url, 'POST', '/api/entitlements', { token, body: { code: 'seats', name: 'Seats' } });
    const license = (await api(serve.url, 'POST', '/api/licenses', {
      token,
      body: { customer_id: customer.id, type: 'hybrid', valid_until: '2099-01-01', entitlements: [{ code: 'seats', usage_limit: 1000000 }], with_decryption_key: true },
    })).body;
    templates = [
      { method: 'GET', path: '/healthz', admin: false },
      { method: 'GET', path: '/readyz', admin: false },
      { method: 'GET', path: '/api/signing-key', admin: true },
      { method: 'POST', path: `/api/licenses/${license.id}/checkout`, admin: true, body: { ttl_days: 30, hardware_id: 'hw-1' } },
      { method: 'GET', path: '/api/customers?active=true&limit=5', admin: true },
      { method: 'POST', path: '/api/customers', admin: true, body: { name: 'New customer' } },
      { method: 'GET', path: `/api/customers/${customer.id}`, admin: true },
      { method: 'POST', path: `/api/customers/${customer.id}/deactivate`, admin: true },
      { method: 'POST', path: `/api/customers/${customer.id}/activate`, admin: true },
      { method: 'POST', path: '/api/entitlements', admin: true, body: { code: 'feature', name: 'Feature' } },
      { method: 'GET', path: '/api/entitlements', admin: true },
      { method: 'POST', path: '/api/licenses', admin: true, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01', entitlements: [{ code: 'seats', usage_limit: 3 }] } },
      { method: 'GET', path: `/api/licenses?customer_id=${customer.id}`, admin: true },
      { method: 'GET', path: `/api/licenses/${license.id}`, admin: true },
      { method: 'GET', path: '/api/audit?limit=3&action=license.created', admin: true },
      { method: 'POST', path: '/api/v1/validate', admin: false, body: { license_key: license.key, hardware_id: 'hw-1', version: '1.0.0' } },
      {
        method: 'POST',
        path: '/api/v1/usage',
        admin: false,
        body: { license_key: license.key, hardware_id: 'hw-1', entitlement_code: 'seats', quantity: 1, occurred_at: '2026-01-01T00:00:00Z', idempotency_key: 'k' },
      },
    ];
  });
  after(async () => {
    if (serve) await serve.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`never answers 500 and never crashes across ${REQUESTS} mutated requests`, async () => {
    const random = prng(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const weird: unknown[] = [null, true, false, 0, -1, 1.5, 1e308, -0, '', ' ', '\u0000', '\ud800', '../../etc/passwd', '<script>', 'é🚀', 'x'.repeat(5000), [], [1, 2], {}, { a: { b: [null] } }, '2026-02-30', '30'];
    const mutateValue = (value: unknown): unknown => (random() < 0.7 ? pick(weird) : typeof value === 'string' ? value.slice(0, Math.floor(random() * value.length)) : value);

    const mutate = (template: Template) => {
      let method = template.method;
      let route = template.path;
      const headers: Record<string, string> = {};
      let body: string | undefined = template.body ? JSON.stringify(template.body) : undefined;
      if (template.admin || random() < 0.1) headers.authorization = `Bearer ${serve.token}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const mutations = 1 + Math.floor(random() * 3);
      for (let i = 0; i < mutations; i += 1) {
        switch (Math.floor(random() * 12)) {
          case 0: method = pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']); break;
          case 1: route = route.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/, pick(['..', '%2e%2e%2f', 'not-a-uuid', '00000000-0000-4000-8000-000000000000', '%00', '%E0%A4%A', 'x'.repeat(300)])); break;
          case 2: route = `${route}${pick(['/', '//', '/..', '?', '?limit=-1', '?limit=99999999999', '&limit=1&limit=2', '?x=%ZZ', '#frag'])}`; break;
          case 3: headers.authorization = pick(['Bearer', 'Bearer x', 'Basic Zm9vOmJhcg==', `Bearer ${serve.token}x`, 'bearer ' + serve.token]); break;
          case 4: delete headers.authorization; break;
          case 5: headers['content-type'] = pick(['text/plain', 'application/json; charset=latin1', 'application/jsonx', 'multipart/form-data', '']); break;
          case 6: headers.accept = pick(['application/octet-stream', '*/*', 'text/html', 'application/octet-stream;q=0', '']); break;
          case 7:
            if (body !== undefined) {
              const bytes = Buffer.from(body);
              const at = Math.floor(random() * bytes.length);
              bytes[at] = bytes[at]! ^ (1 << Math.floor(random() * 8));
              body = bytes.toString('latin1');
            }
            break;
          case 8: if (body !== undefined) body = body.slice(0, Math.floor(random() * body.length)); break;
          case 9:
            if (template.body) {
              const object: Record<string, unknown> = JSON.parse(JSON.stringify(template.body));
              const keys = Object.keys(object);
              const choice = random();
              if (choice < 0.4 && keys.length) object[pick(keys)] = mutateValue(object[pick(keys)]);
              else if (choice < 0.7 && keys.length) delete object[pick(keys)];
              else object[pick(['extra', '__proto__', 'constructor', 'ttl_day'])] = pick(weird);
              body = JSON.stringify(object);
            }
            break;
          case 10: body = pick(['', 'null', '[]', '"string"', '{', '{"a":', JSON.stringify({ deep: JSON.parse('['.repeat(500) + ']'.repeat(500)) })]); headers['content-type'] = 'application/json'; break;
          case 11: headers['x-request-id'] = pick(['ok-id', 'bad id with spaces', 'x'.repeat(200), '../']); break;
        }
      }
      return { method, route, headers, body: method === 'GET' || method === 'HEAD' ? undefined : body };
    };

    const statuses = new Map<number, number>();
    let sent = 0;
    const worker = async () => {
      while (sent < REQUESTS) {
        sent += 1;
        const request = mutate(pick(templates));
        let result: { status: number; body: any; text: string };
        try {
          result = await rawRequest(serve.url, request.method, request.route.split('#')[0]!, { headers: request.headers, body: request.body });
        } catch (error) {
          // The client library refused to send it (an invalid header value): nothing reached the server.
          if ((error as NodeJS.ErrnoException).code === 'ERR_INVALID_CHAR' || (error as NodeJS.ErrnoException).code === 'ERR_UNESCAPED_CHARACTERS') continue;
          throw new Error(`seed ${seed}: ${request.method} ${request.route}: ${String(error)}`);
        }
        statuses.set(result.status, (statuses.get(result.status) ?? 0) + 1);
        assert.ok(result.status < 500, `seed ${seed}: ${request.method} ${request.route} ${request.body?.slice(0, 200)} -> ${result.status} ${result.text}`);
        if (result.status >= 400 && request.method !== 'HEAD') {
          assert.equal(typeof result.body?.error?.code, 'string', `seed ${seed}: ${request.method} ${request.route} -> ${result.text}`);
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    assert.equal(serve.child.exitCode, null, 'the daemon is still running');
    assert.equal((await api(serve.url, 'GET', '/healthz')).status, 200);
    assert.ok(!/"status":5\d\d/.test(serve.stderr()), 'no 5xx in the log');
    assert.ok((statuses.get(200) ?? 0) + (statuses.get(201) ?? 0) > 0 && (statuses.get(400) ?? 0) > 0, JSON.stringify([...statuses]));
  });
});
