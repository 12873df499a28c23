#!/usr/bin/env node
// GET /metrics after a real load, and what scraping costs (issue 27 item 1):
//
//   npm run build && node bench/metrics.mjs [--seconds 5] [--connections 20] [--database-url postgres://.../empty-db]
//
// A real `license-server serve` (SQLite unless --database-url) with its metrics listener
// (server.metrics_port) gets: validations of several licenses, valid and refused (machine
// limit, revoked, deactivated machine, not found, not yet valid, invalid input), checkouts,
// usage reports, a backup. Then it prints every metric name with its number of series, and how
// long a scrape takes. Last, validation throughput with a scrape every 100 ms against none, in
// the same run (A, B, A: the ratio is B over the mean of both A's).
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
const seconds = Number(arg('seconds', 5));
const connections = Number(arg('connections', 20));
const databaseUrl = arg('database-url', undefined);
const cli = fileURLToPath(new URL('../bin/run.js', import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), 'license-bench-metrics-'));

const child = spawn(process.execPath, [cli, 'serve', '--port', '0'], {
  cwd: dir,
  env: { ...process.env, LICENSE_DATA_DIR: path.join(dir, 'data'), LICENSE_METRICS_PORT: '0', LICENSE_CLIENT_RATE_LIMIT: '0', ...(databaseUrl ? { LICENSE_DATABASE_URL: databaseUrl } : {}) },
  stdio: ['ignore', 'pipe', 'ignore'],
});
const banner = await new Promise((resolve, reject) => {
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk) => {
    out += chunk;
    if (/^admin token/m.test(out)) resolve(out);
  });
  child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
});
const base = /listening on (http:\/\/\S+)/.exec(banner)[1];
const metricsUrl = /metrics listening on (http:\/\/\S+\/metrics)/.exec(banner)[1];
const token = /store it now\): (lsat_\S+)/.exec(banner)[1];

async function call(method, route, body, withToken = true) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { ...(withToken ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}
const validate = (key, hardware) => call('POST', '/api/v1/validate', { license_key: key, hardware_id: hardware, version: '1.0.0' }, false);

try {
  // The store: 8 licenses that validate, one limited to 2 machines, one revoked, one not yet valid.
  const customer = (await call('POST', '/api/customers', { name: 'Bench Corp' })).body;
  await call('POST', '/api/entitlements', { code: 'seats', name: 'Seats' });
  const license = async (extra = {}) =>
    (await call('POST', '/api/licenses', { customer_id: customer.id, type: 'hybrid', valid_until: '2099-12-31', entitlements: [{ code: 'seats', usage_limit: 1_000_000 }], ...extra })).body;
  const good = [];
  for (let i = 0; i < 8; i += 1) good.push(await license());
  const limited = await license({ max_machines: 2 });
  const revoked = await license();
  await call('POST', `/api/licenses/${revoked.id}/deactivate`);
  const later = await license({ valid_from: '2098-01-01' });

  // Every outcome at least once.
  const outcomes = {};
  const note = (answer) => {
    const outcome = answer.body?.valid === true ? 'valid' : answer.body?.reason ?? answer.body?.error?.code;
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  };
  for (const hw of ['HW-A', 'HW-B', 'HW-C', 'HW-D']) note(await validate(limited.key, hw));
  note(await validate(revoked.key, 'HW-A'));
  note(await validate(later.key, 'HW-A'));
  note(await validate('LS-NOT-A-KEY', 'HW-A'));
  note(await call('POST', '/api/v1/validate', { license_key: good[0].key, hardware_id: '', version: '1' }, false));
  note(await validate(good[0].key, 'HW-GONE'));
  const machine = (await call('GET', `/api/machines?license_id=${good[0].id}`)).body.find((m) => m.hardware_id === 'HW-GONE');
  await call('POST', `/api/machines/${machine.id}/deactivate`);
  note(await validate(good[0].key, 'HW-GONE'));
  for (let i = 0; i < 20; i += 1) {
    const answer = await call('POST', `/api/licenses/${good[i % 8].id}/checkout`, { ttl_days: 30, hardware_id: `HW-OFF-${i}` });
    outcomes[`checkout ${answer.status}`] = (outcomes[`checkout ${answer.status}`] ?? 0) + 1;
  }
  for (let i = 0; i < 50; i += 1) {
    const answer = await call('POST', '/api/v1/usage', { license_key: good[i % 8].key, hardware_id: 'HW-0', entitlement_code: 'seats', quantity: 1, occurred_at: new Date().toISOString(), idempotency_key: `u-${i % 40}` }, false);
    outcomes[`usage ${answer.status}`] = (outcomes[`usage ${answer.status}`] ?? 0) + 1;
  }
  const backup = await call('POST', '/api/backups');
  outcomes[`backup ${backup.status}`] = 1;

  // The load: validations of the 8 good licenses, 4 machines each, from `connections` connections.
  const requests = [];
  for (let i = 0; i < 32; i += 1) {
    requests.push({ method: 'POST', path: '/api/v1/validate', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ license_key: good[i % 8].key, hardware_id: `HW-${i % 4}`, version: '1.0.0' }) });
  }
  const load = async (scrapeEveryMs) => {
    let scrapes = 0;
    let stop = false;
    const scraper = scrapeEveryMs
      ? (async () => {
          while (!stop) {
            await (await fetch(metricsUrl)).text();
            scrapes += 1;
            await new Promise((resolve) => setTimeout(resolve, scrapeEveryMs));
          }
        })()
      : Promise.resolve();
    const result = await autocannon({ url: base, connections, duration: seconds, requests });
    stop = true;
    await scraper;
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`load: ${result.non2xx} non-2xx, ${result.errors} errors`);
    return { rps: result.requests.average, p99: result.latency.p99, scrapes };
  };
  await load(0); // warm-up
  const a1 = await load(0);
  const b = await load(100);
  const a2 = await load(0);

  // The scrape after the load.
  const times = [];
  let text = '';
  for (let i = 0; i < 20; i += 1) {
    const started = process.hrtime.bigint();
    text = await (await fetch(metricsUrl)).text();
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  times.sort((x, y) => x - y);
  const series = new Map();
  const types = new Map();
  for (const line of text.split('\n')) {
    const typed = /^# TYPE (\S+) (\S+)/.exec(line);
    if (typed) types.set(typed[1], typed[2]);
    if (!line || line.startsWith('#')) continue;
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)[0];
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count|created)$/, '');
    series.set(family, (series.get(family) ?? 0) + 1);
  }

  console.log(`engine: ${databaseUrl ? 'postgres' : 'sqlite'}; load ${seconds} s x 3 at ${connections} connections, plus outcomes: ${JSON.stringify(outcomes)}`);
  console.log('\nmetric                                                           type       series');
  let total = 0;
  let ours = 0;
  for (const [name, count] of series) {
    total += count;
    if (name.startsWith('license_server_')) ours += count;
    console.log(`${name.padEnd(64)} ${(types.get(name) ?? '').padEnd(10)} ${count}`);
  }
  console.log(`\nseries: ${total} in all, ${ours} license_server_*; exposition ${Buffer.byteLength(text)} bytes`);
  console.log(`scrape (GET /metrics on the metrics listener, 20 after the load): median ${times[10].toFixed(1)} ms, max ${times[19].toFixed(1)} ms`);
  console.log(`validations/s without scraping: ${a1.rps.toFixed(0)} then ${a2.rps.toFixed(0)} (p99 ${a1.p99} / ${a2.p99} ms)`);
  console.log(`validations/s with a scrape every 100 ms: ${b.rps.toFixed(0)} (p99 ${b.p99} ms, ${b.scrapes} scrapes)`);
  console.log(`ratio with/without scraping: ${(b.rps / ((a1.rps + a2.rps) / 2)).toFixed(3)}`);
} finally {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  rmSync(dir, { recursive: true, force: true });
}
