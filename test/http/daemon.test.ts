import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { createTestDatabase, dropTestDatabase, requirePostgres } from '../support/postgres.js';
import { eventually } from '../support/fake-clock.js';
import { api, startServe } from '../support/serve.js';
import { scaledMs } from '../support/busy-machine.js';

/** A raw TCP conversation, for clients that misbehave on purpose. */
function openSocket(url: string): Promise<Socket & { received: () => string; ended: Promise<void> }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      let data = '';
      socket.setEncoding('utf8').on('data', (chunk: string) => (data += chunk));
      const ended = new Promise<void>((done) => socket.once("close", () => done()));
      resolve(Object.assign(socket, { received: () => data, ended }));
    });
    socket.once('error', reject);
  });
}

function bodyOf(response: string): any {
  return JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4));
}

describe('the daemon process', () => {
  const dirs: string[] = [];
  const sqliteEnv = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'license-daemon-'));
    dirs.push(dir);
    return { LICENSE_DATABASE_URL: path.join(dir, 'data', 'license-server.db') };
  };
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('prints the bootstrap admin token on the first start only', async () => {
    const env = sqliteEnv();
    const first = await startServe(env);
    assert.match(first.token!, /^lsat_/);
    assert.equal((await first.stop()).code, 0);
    const second = await startServe(env);
    assert.equal(second.token, undefined);
    assert.match(second.stdout(), /admin token: none created/);
    assert.equal((await api(second.url, 'GET', '/api/signing-key', { token: first.token })).status, 200);
    assert.equal((await second.stop()).code, 0);
    const bootstrap = await startServe({ ...sqliteEnv(), LICENSE_ADMIN_TOKEN: 'configured-bootstrap-token-1234567890' });
    assert.equal(bootstrap.token, undefined);
    assert.equal((await api(bootstrap.url, 'GET', '/api/signing-key', { token: 'configured-bootstrap-token-1234567890' })).status, 200);
    await bootstrap.stop();
  });

  it('limits client requests per address with 429 and Retry-After', async () => {
    const serve = await startServe({ ...sqliteEnv(), LICENSE_CLIENT_RATE_LIMIT: '1', LICENSE_CLIENT_RATE_BURST: '3' });
    try {
      const ask = () => api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: 'x', hardware_id: 'h', version: '1' } });
      // At once, so that the bucket (3, refilled at 1 a second) cannot refill much between them:
      // one after another, on a loaded machine, they took long enough to be refilled (CI).
      const started = Date.now();
      const statuses = await Promise.all(Array.from({ length: 10 }, ask));
      const seconds = (Date.now() - started) / 1000;
      const allowed = statuses.filter((r) => r.status === 200).length;
      const limited = statuses.filter((r) => r.status === 429);
      assert.equal(allowed + limited.length, 10, JSON.stringify(statuses.map((r) => r.status)));
      assert.ok(allowed >= 3 && allowed <= 3 + Math.ceil(seconds), `${allowed} allowed in ${seconds} s, with a burst of 3 and 1 a second`);
      assert.ok(limited.length > 0, 'some were limited');
      assert.equal(limited[0]!.body.error.code, 'RATE_LIMITED');
      assert.equal(limited[0]!.headers.get('retry-after'), '1');
      assert.equal((await api(serve.url, 'GET', '/api/signing-key', { token: serve.token })).status, 200, 'admin routes are not limited');
    } finally {
      await serve.stop();
    }
  });

  it('answers slow clients with 408 and the error body, and stays up', async () => {
    const serve = await startServe({ ...sqliteEnv(), LICENSE_REQUEST_TIMEOUT: '1' });
    try {
      const slowBody = await openSocket(serve.url);
      slowBody.write('POST /api/v1/validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"license_key":');
      await slowBody.ended;
      assert.match(slowBody.received(), /^HTTP\/1\.1 408 /);
      assert.equal(bodyOf(slowBody.received()).error.code, 'REQUEST_TIMEOUT');

      const slowHeaders = await openSocket(serve.url);
      slowHeaders.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      await slowHeaders.ended;
      assert.match(slowHeaders.received(), /^HTTP\/1\.1 408 /);
      assert.equal(bodyOf(slowHeaders.received()).error.code, 'REQUEST_TIMEOUT');

      const garbage = await openSocket(serve.url);
      garbage.write('THIS IS NOT HTTP\r\n\r\n');
      await garbage.ended;
      assert.match(garbage.received(), /^HTTP\/1\.1 400 /);
      assert.equal((await api(serve.url, 'GET', '/healthz')).status, 200);
    } finally {
      await serve.stop();
    }
  });

  it('answers an unusual Transfer-Encoding with 400 and the JSON error body, and stays up', async () => {
    const serve = await startServe(sqliteEnv());
    try {
      const encodings = ['identity', 'xchunked', 'gzip', 'chunked, identity', 'identity, chunked', 'gzip, chunked', 'chunked\r\nTransfer-Encoding: chunked', 'chunked\r\nTransfer-Encoding: identity'];
      for (const encoding of encodings) {
        for (const [method, route, auth] of [['POST', '/api/v1/validate', ''], ['POST', '/api/customers', `Authorization: Bearer ${serve.token}\r\n`], ['GET', '/healthz', '']] as const) {
          const socket = await openSocket(serve.url);
          socket.write(`${method} ${route} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: ${encoding}\r\n\r\n2\r\n{}\r\n0\r\n\r\n`);
          await socket.ended;
          const what = `${method} ${route} with Transfer-Encoding: ${JSON.stringify(encoding)}`;
          assert.match(socket.received(), /^HTTP\/1\.1 400 /, `${what}: ${JSON.stringify(socket.received())}`);
          assert.match(socket.received(), /\r\nConnection: close\r\n/i, what);
          assert.match(socket.received(), /\r\nContent-Type: application\/json; charset=utf-8\r\n/i, what);
          assert.equal(bodyOf(socket.received()).error.code, 'INVALID_INPUT', what);
        }
      }
      assert.equal((await api(serve.url, 'GET', '/healthz')).status, 200);
    } finally {
      await serve.stop();
    }
  });

  it('drains on SIGTERM: a request in flight completes, new connections are refused, exit 0 within 10 s', async () => {
    const serve = await startServe(sqliteEnv());
    const socket = await openSocket(serve.url);
    const body = JSON.stringify({ name: 'Drained Ltd' });
    socket.write(`POST /api/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${serve.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    // The partial request must have reached the daemon before the signal (a connection it has
    // read nothing from is idle, and closed unanswered); longer on a busy machine.
    await new Promise((resolve) => setTimeout(resolve, scaledMs(200)));
    const stopped = serve.stop('SIGTERM');
    // Fixed waits failed here at load 10: the daemon had not yet acted on the signal.
    await eventually(() => serve.stderr().includes('"msg":"shutting down"'), 'the daemon began its shutdown');
    await eventually(async () => fetch(`${serve.url}/healthz`).then(() => false, () => true), 'the listener is closed to new connections');
    socket.write(body.slice(5));
    await socket.ended;
    assert.match(socket.received(), /^HTTP\/1\.1 201 /);
    assert.match(socket.received(), /Connection: close/i);
    assert.equal(bodyOf(socket.received()).name, 'Drained Ltd');
    const { code, ms } = await stopped;
    assert.equal(code, 0);
    // 8 s for requests in flight, then the close; a busy machine stretches the whole.
    assert.ok(ms < scaledMs(10_000), `took ${ms} ms`);
    assert.match(serve.stderr(), /"msg":"shutting down","signal":"SIGTERM"/);
  });

  it('at SIGTERM closes idle keep-alive connections unanswered, answers a request arriving on an open one with 503, and finishes the one in flight', async () => {
    const serve = await startServe(sqliteEnv());
    const idle = await openSocket(serve.url);
    idle.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    while (!idle.received().endsWith('{"status":"ok"}')) await new Promise((resolve) => setTimeout(resolve, 10));
    const inFlight = await openSocket(serve.url);
    const body = JSON.stringify({ name: 'Drained Ltd' });
    inFlight.write(`POST /api/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${serve.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    const arriving = await openSocket(serve.url);
    arriving.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    // Both partial requests must have reached the daemon before the signal.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stopped = serve.stop('SIGTERM');
    await eventually(() => serve.stderr().includes('"msg":"shutting down"'), 'the daemon began its shutdown');

    await idle.ended;
    assert.equal(idle.received().match(/HTTP\/1\.1 /g)!.length, 1, 'the idle connection is closed without another answer');
    arriving.write('\r\n');
    await arriving.ended;
    assert.match(arriving.received(), /^HTTP\/1\.1 503 /, arriving.received());
    assert.match(arriving.received(), /\r\nConnection: close\r\n/i);
    assert.equal(bodyOf(arriving.received()).error.code, 'SHUTTING_DOWN');
    inFlight.write(body.slice(5));
    await inFlight.ended;
    assert.match(inFlight.received(), /^HTTP\/1\.1 201 /);
    assert.match(inFlight.received(), /\r\nConnection: close\r\n/i);
    assert.equal((await stopped).code, 0);
    assert.match(serve.stderr(), /"msg":"drained"/);
  });

  it('serves HTTPS with --tls-cert and --tls-key', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'license-tls-'));
    dirs.push(dir);
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ed25519', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
    const serve = await startServe(sqliteEnv(), ['--tls-cert', path.join(dir, 'cert.pem'), '--tls-key', path.join(dir, 'key.pem')]);
    try {
      assert.match(serve.url, /^https:\/\//);
      const { hostname, port } = new URL(serve.url);
      const text = await new Promise<string>((resolve, reject) => {
        httpsRequest({ hostname, port, path: '/healthz', rejectUnauthorized: false }, (response) => {
          let data = '';
          response.on('data', (chunk) => (data += chunk)).on('end', () => resolve(data));
        }).on('error', reject).end();
      });
      assert.deepEqual(JSON.parse(text), { status: 'ok' });
    } finally {
      await serve.stop();
    }
  });

  describe('two processes on one PostgreSQL database', () => {
    let databaseUrl: string;
    before(async function () {
      await requirePostgres(this);
      databaseUrl = await createTestDatabase();
    });
    after(async () => {
      if (databaseUrl) await dropTestDatabase(databaseUrl);
    });

    it('started at the same moment, share one signing key and one bootstrap token, and both serve', async () => {
      const [a, b] = await Promise.all([startServe({ LICENSE_DATABASE_URL: databaseUrl }), startServe({ LICENSE_DATABASE_URL: databaseUrl })]);
      try {
        assert.equal(a.fingerprint, b.fingerprint, 'one signing key');
        const tokens = [a.token, b.token].filter(Boolean);
        assert.equal(tokens.length, 1, 'exactly one process printed a bootstrap token');
        const token = tokens[0]!;
        const pem = (await api(a.url, 'GET', '/api/signing-key', { token })).body.public_key_pem;
        assert.equal((await api(b.url, 'GET', '/api/signing-key', { token })).body.public_key_pem, pem);

        const customer = (await api(a.url, 'POST', '/api/customers', { token, body: { name: 'Shared' } })).body;
        await api(b.url, 'POST', '/api/entitlements', { token, body: { code: 'seats', name: 'Seats' } });
        const license = (await api(a.url, 'POST', '/api/licenses', {
          token,
          body: { customer_id: customer.id, type: 'hybrid', valid_until: '2099-01-01', entitlements: [{ code: 'seats', usage_limit: 10 }] },
        })).body;
        for (const server of [a, b]) {
          const checkout = await api(server.url, 'POST', `/api/licenses/${license.id}/checkout`, { token, body: { ttl_days: 10 } });
          assert.ok(verifyLicenseFile(checkout.body.license_file, { publicKey: pem }));
          const answer = await api(server.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: 'h', version: '1' } });
          assert.equal(answer.body.valid, true);
        }
        const reports = await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            api(i % 2 ? a.url : b.url, 'POST', '/api/v1/usage', {
              body: { license_key: license.key, hardware_id: 'h', entitlement_code: 'seats', quantity: 1, occurred_at: new Date().toISOString(), idempotency_key: `k${i}` },
            }),
          ),
        );
        assert.equal(reports.filter((r) => r.status === 201).length, 10, 'the limit holds across processes');
        const audit = (await api(b.url, 'GET', '/api/audit?action=license.checked_out', { token })).body;
        assert.equal(audit.length, 2);
      } finally {
        await Promise.all([a.stop(), b.stop()]);
      }
    });
  });
});
