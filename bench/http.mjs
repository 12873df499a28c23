#!/usr/bin/env node
// HTTP throughput of the daemon, as ratios to a baseline measured in the same run:
//
//   npm run build && node bench/http.mjs [--seconds 10] [--connections 50]
//     [--max-machines N [--floating]] [--database-url postgres://.../empty-db]
//
// - baseline: a bare node:http endpoint (its own process) that reads a small JSON body and
//   signs one message per request with node:crypto's Ed25519, from a cached KeyObject.
// - checkouts: POST /api/licenses/{id}/checkout against a real `license-server serve` on
//   SQLite (hardware-bound, sealed decryption key, audit row per request).
// - validations: POST /api/v1/validate (grace token signed per request). With
//   --max-machines the license limits its machines (--floating: seats as 1-hour leases), so
//   each validation goes through seat admission: a machine holding its seat is read, not
//   locked, and its lease written at most once a minute.
// --database-url runs the daemon on that (empty) database instead of a SQLite file.
// Load comes from autocannon in this process. Goals from issue 4: HTTP checkout >= 0.6x the
// baseline's rate, p99 < 50 ms at 50 connections.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const seconds = Number(arg('seconds', 10));
const connections = Number(arg('connections', 50));
const maxMachines = arg('max-machines', undefined);
const floating = process.argv.includes('--floating');
const databaseUrl = arg('database-url', undefined);
const cli = fileURLToPath(new URL('../bin/run.js', import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), 'license-bench-http-'));
const children = [];

/** Starts a child process and resolves with the first URL it prints. */
function start(args, env = {}) {
  const child = spawn(process.execPath, args, { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      out += chunk;
      const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
      if (url && (!args.includes('serve') || /admin token/.test(out))) resolve({ url, out });
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}: ${out}`)));
  });
}

const BASELINE = `
const { createServer } = require('node:http');
const { generateKeyPairSync, sign } = require('node:crypto');
const { privateKey } = generateKeyPairSync('ed25519');
const server = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8').on('data', (c) => (body += c)).on('end', () => {
    const input = JSON.parse(body || '{}');
    const message = Buffer.from(JSON.stringify({ ...input, issued_at: new Date().toISOString(), padding: 'x'.repeat(500) }));
    const out = JSON.stringify({ signature: sign(null, message, privateKey).toString('base64') });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) }).end(out);
  });
});
server.keepAliveTimeout = 5000;
server.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + server.address().port));
`;

async function load(url, { path: route, body, headers = {} }) {
  const result = await autocannon({
    url: url + route,
    method: 'POST',
    connections,
    duration: seconds,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { rate: result.requests.average, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

async function api(url, token, method, route, body) {
  const response = await fetch(url + route, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  return response.json();
}

try {
  const baseline = await start(['-e', BASELINE]);
  const serve = await start([cli, 'serve', '--port', '0'], {
    LICENSE_DATA_DIR: path.join(dir, 'data'),
    LICENSE_CLIENT_RATE_LIMIT: '0',
    ...(databaseUrl ? { LICENSE_DATABASE_URL: databaseUrl } : {}),
  });
  const token = /admin token \(shown only this once, store it now\): (\S+)/.exec(serve.out)[1];
  const customer = await api(serve.url, token, 'POST', '/api/customers', { name: 'Bench & Co' });
  for (const code of ['export', 'seats', 'sso']) await api(serve.url, token, 'POST', '/api/entitlements', { code, name: code });
  const license = await api(serve.url, token, 'POST', '/api/licenses', {
    customer_id: customer.id,
    type: 'hybrid',
    valid_until: '2099-12-31',
    entitlements: [{ code: 'export' }, { code: 'seats', usage_limit: 25 }, { code: 'sso' }],
    with_decryption_key: true,
    ...(maxMachines ? { max_machines: Number(maxMachines), ...(floating ? { floating: true, lease_hours: 1 } : {}) } : {}),
  });

  // Warm-up: JIT, caches, connection pools.
  const short = seconds;
  const warm = (url, spec) => autocannon({ url: url + spec.path, method: 'POST', connections, duration: 2, headers: { 'content-type': 'application/json', ...spec.headers }, body: JSON.stringify(spec.body) });
  const checkout = { path: `/api/licenses/${license.id}/checkout`, body: { ttl_days: 30, hardware_id: 'bench-machine-01' }, headers: { authorization: `Bearer ${token}` } };
  const validate = { path: '/api/v1/validate', body: { license_key: license.key, hardware_id: 'bench-machine-01', version: '1.0.0' } };
  const bare = { path: '/sign', body: { ttl_days: 30, hardware_id: 'bench-machine-01' } };
  await warm(baseline.url, bare);
  await warm(serve.url, checkout);

  const results = {
    baseline: await load(baseline.url, bare),
    checkout: await load(serve.url, checkout),
    validate: await load(serve.url, validate),
  };
  const terms = maxMachines ? `max_machines ${maxMachines}${floating ? ', floating' : ''}` : 'no machine limit';
  console.log(`node ${process.version}, ${connections} connections, ${short} s each, autocannon in the bench process, ${databaseUrl ? 'PostgreSQL' : 'SQLite'}, ${terms}`);
  const row = (name, r, goal) => {
    const ratio = r.rate / results.baseline.rate;
    const verdicts = goal ? [`ratio ${ratio >= goal ? 'met' : 'MISSED'} (>= ${goal})`, `p99 ${r.p99 < 50 ? 'met' : 'MISSED'} (< 50 ms)`].join(', ') : '';
    console.log(`${name.padEnd(44)} ${r.rate.toFixed(0).padStart(6)}/s  p99 ${String(r.p99).padStart(4)} ms  ${ratio.toFixed(2)}x  non-2xx ${r.non2xx}  errors ${r.errors}  ${verdicts}`);
    return !goal || (ratio >= goal && r.p99 < 50);
  };
  row('bare node:http + node:crypto sign (baseline)', results.baseline);
  const ok = row('serve: POST /api/licenses/{id}/checkout', results.checkout, 0.6);
  row('serve: POST /api/v1/validate', results.validate);
  process.exitCode = ok && results.checkout.non2xx === 0 && results.validate.non2xx === 0 ? 0 : 1;
} finally {
  for (const child of children) child.kill('SIGTERM');
  setTimeout(() => rmSync(dir, { recursive: true, force: true }), 500);
}
