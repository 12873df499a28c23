// What bench/http.mjs and bench/compare.mjs share: starting a daemon (or the bare baseline
// process) and reading the URL it prints, the fixture every HTTP bench loads, and one
// autocannon run.
import { spawn } from 'node:child_process';
import autocannon from 'autocannon';

/**
 * A bare node:http endpoint that reads a small JSON body and signs one message per request
 * with node:crypto's Ed25519 from a cached KeyObject: what a checkout cannot be faster than.
 */
export const BASELINE_SOURCE = `
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

/**
 * Starts a Node process and resolves with the first loopback URL it prints (for `serve`,
 * once it has also printed its admin token). The caller kills it (`children` collects it).
 */
export function startProcess(args, { cwd, env = {}, children }) {
  // The caller's environment without LICENSE_* variables, which would configure the daemon.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('LICENSE_')));
  const child = spawn(process.execPath, args, { cwd, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'ignore'] });
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

/** The admin token a first `serve` printed. */
export const adminToken = (out) => /admin token \(shown only this once, store it now\): (\S+)/.exec(out)[1];

async function api(url, token, method, route, body) {
  const response = await fetch(url + route, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  return response.json();
}

/**
 * One customer, three entitlements and one hybrid license with a decryption key; returns the
 * checkout and validation requests to load. `terms` adds max_machines (and floating seats).
 */
export async function prepareLicense(url, token, terms = {}) {
  const customer = await api(url, token, 'POST', '/api/customers', { name: 'Bench & Co' });
  for (const code of ['export', 'seats', 'sso']) await api(url, token, 'POST', '/api/entitlements', { code, name: code });
  const license = await api(url, token, 'POST', '/api/licenses', {
    customer_id: customer.id,
    type: 'hybrid',
    valid_until: '2099-12-31',
    entitlements: [{ code: 'export' }, { code: 'seats', usage_limit: 25 }, { code: 'sso' }],
    with_decryption_key: true,
    ...terms,
  });
  return {
    checkout: { path: `/api/licenses/${license.id}/checkout`, body: { ttl_days: 30, hardware_id: 'bench-machine-01' }, headers: { authorization: `Bearer ${token}` } },
    validate: { path: '/api/v1/validate', body: { license_key: license.key, hardware_id: 'bench-machine-01', version: '1.0.0' } },
  };
}

/** The baseline's request, shaped like a checkout's. */
export const BARE_REQUEST = { path: '/sign', body: { ttl_days: 30, hardware_id: 'bench-machine-01' } };

/** Loads one route for `seconds` with `connections` connections; rate is requests per second. */
export async function load(url, request, { seconds, connections }) {
  const result = await autocannon({
    url: url + request.path,
    method: 'POST',
    connections,
    duration: seconds,
    headers: { 'content-type': 'application/json', ...request.headers },
    body: JSON.stringify(request.body),
  });
  return { rate: result.requests.average, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}
