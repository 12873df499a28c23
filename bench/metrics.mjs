#!/usr/bin/env node
// GET /metrics after a real load, and what scraping costs (issue 27 item 1, issue 35 item 29):
//
//   npm run build && node bench/metrics.mjs [--seconds 5] [--connections 20] [--database-url postgres://.../empty-db]
//   npm run build && node bench/metrics.mjs --size L [--postgres postgres://postgres@127.0.0.1:5432/postgres]
//     [--store-dir DIR] [--seconds 20] [--rounds 3] [--scrape-every 5000] [--refresh SECONDS]
//
// Without --size: a real `license-server serve` (SQLite unless --database-url) with its metrics
// listener (server.metrics_port) gets validations of several licenses, valid and refused
// (machine limit, revoked, deactivated machine, not found, not yet valid, invalid input),
// checkouts, usage reports, a backup. Then it prints every metric name with its number of
// series, and how long a scrape takes. Last, validation throughput with a scrape every 100 ms
// against none, in the same run (A, B, A: the ratio is B over the mean of both A's).
//
// With --size S|M|L: the same daemon on a store of that size (bench/lib/scale-store.mjs; L is
// 1M machines, built once and cached under --store-dir, default bench/.stores, each run on a
// copy), --postgres for PostgreSQL. It waits for the daemon's first background read of the
// store's figures, then reports: that read's duration (what every scrape cost before issue 35),
// the time of 50 scrapes (goal: under 50 ms), and validation throughput without scraping (A)
// and with a scrape every --scrape-every ms (B, default 5000, Prometheus at a 5 s interval),
// alternated A B A B ... A over --rounds rounds: the ratio is the B's over the A's (goal: at
// least 0.95). The background reads run in both A and B, as they do in a daemon: their share of
// the time is reported beside. The machine is shared: read the ratios, and run it again.
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
const size = arg('size', undefined)?.toUpperCase();
const seconds = Number(arg('seconds', size ? 20 : 5));
const connections = Number(arg('connections', 20));
const rounds = Number(arg('rounds', 3));
const scrapeEvery = Number(arg('scrape-every', size ? 5000 : 100));
const refresh = arg('refresh', undefined);
const databaseUrl = arg('database-url', undefined);
const postgres = arg('postgres', undefined);
const cli = fileURLToPath(new URL('../bin/run.js', import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), 'license-bench-metrics-'));
const t0 = Date.now();
const progress = (line) => console.error(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}`);

const store = size
  ? await (await import('./lib/scale-store.mjs')).buildScaleStore({ size, postgres, storeDir: arg('store-dir', undefined), log: progress })
  : undefined;
const cleanEnv = {};
for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('LICENSE_')) cleanEnv[name] = value;
const child = spawn(process.execPath, [cli, 'serve', '--port', '0'], {
  cwd: dir,
  env: {
    ...cleanEnv,
    LICENSE_DATA_DIR: path.join(dir, 'data'),
    ...(databaseUrl ? { LICENSE_DATABASE_URL: databaseUrl } : {}),
    ...(store ? store.env : {}),
    LICENSE_METRICS_PORT: '0',
    LICENSE_CLIENT_RATE_LIMIT: '0',
    ...(refresh ? { LICENSE_METRICS_STORE_REFRESH: refresh } : {}),
  },
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
const token = store ? store.adminToken : /store it now\): (lsat_\S+)/.exec(banner)[1];

/** The value of one sample line of the exposition, or undefined. */
const valueOf = (text, series) => {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
};

/** Milliseconds of one scrape, and its text. */
async function scrape() {
  const started = process.hrtime.bigint();
  const text = await (await fetch(metricsUrl)).text();
  return { ms: Number(process.hrtime.bigint() - started) / 1e6, text };
}

/** Validation load from `connections` connections; with scrapeEveryMs, Prometheus beside it. */
async function load(requests, scrapeEveryMs, duration = seconds) {
  const scrapes = [];
  let stop = false;
  const scraper = scrapeEveryMs
    ? (async () => {
        while (!stop) {
          scrapes.push((await scrape()).ms);
          await new Promise((resolve) => setTimeout(resolve, scrapeEveryMs));
        }
      })()
    : Promise.resolve();
  const result = await autocannon({ url: base, connections, duration, requests });
  stop = true;
  await scraper;
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`load: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p99: result.latency.p99, scrapes };
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

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
  if (store) await atSize();
  else await smallStore();
} finally {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  rmSync(dir, { recursive: true, force: true });
  await store?.dispose();
}

async function atSize() {
  const engine = store.engine;
  // The first background read starts with the daemon (a daemon from before issue 35 read at each scrape, and gave up after 2 s).
  let first;
  // Polled at the scrape interval, as Prometheus would: faster polling would pile reads up on an old daemon.
  const until = Date.now() + 120_000;
  for (;;) {
    first = (await scrape()).text;
    if (valueOf(first, 'license_server_store_up') === 1 || Date.now() > until) break;
    await new Promise((resolve) => setTimeout(resolve, scrapeEvery));
  }
  const seconds2 = (value) => (value === undefined ? 'n/a' : `${value.toFixed(2)} s`);
  progress(`first read of the store's figures: ${seconds2(valueOf(first, 'license_server_store_read_duration_seconds'))} (store_up ${valueOf(first, 'license_server_store_up')})`);
  const requests = store.sample.licenseKeys.map((key, i) => ({
    method: 'POST',
    path: '/api/v1/validate',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ license_key: key, hardware_id: store.sample.hardwareIds[i], version: '1.0.0' }),
  }));
  await load(requests, 0, Math.min(seconds, 10)); // warm-up

  // The daemon's own CPU over 50 scrapes (process_cpu_seconds_total, read by the first and the last).
  const idle = [];
  let cpuBefore;
  let cpuAfter;
  for (let i = 0; i < 51; i += 1) {
    const { ms, text } = await scrape();
    if (i === 0) cpuBefore = valueOf(text, 'process_cpu_seconds_total');
    else idle.push(ms);
    if (i === 50) cpuAfter = valueOf(text, 'process_cpu_seconds_total');
  }
  idle.sort((x, y) => x - y);
  const cpuPerScrape = ((cpuAfter - cpuBefore) * 1000) / 50;

  const a = [];
  const b = [];
  const during = [];
  for (let round = 0; round < rounds; round += 1) {
    a.push(await load(requests, 0));
    const withScrapes = await load(requests, scrapeEvery);
    b.push(withScrapes);
    during.push(...withScrapes.scrapes);
    progress(`round ${round + 1}: A ${a.at(-1).rps.toFixed(0)}/s, B ${withScrapes.rps.toFixed(0)}/s (${withScrapes.scrapes.length} scrapes)`);
  }
  a.push(await load(requests, 0));
  during.sort((x, y) => x - y);
  const last = (await scrape()).text;
  const mean = (runs) => runs.reduce((sum, run) => sum + run.rps, 0) / runs.length;
  const readSeconds = valueOf(last, 'license_server_store_read_duration_seconds');
  const age = valueOf(last, 'license_server_store_figures_age_seconds');
  const seats = valueOf(last, 'license_server_store_seats_in_use');
  const interval = Number(refresh ?? 30);
  const spacing = Math.max(interval, 19 * (readSeconds ?? 0));

  console.log(`engine: ${engine}; store ${size} (${store.counts.machines.toLocaleString('en')} machines, ${store.counts.licenses.toLocaleString('en')} licenses); ${connections} connections, ${seconds} s per phase, ${rounds} rounds`);
  console.log(
    readSeconds === undefined
      ? `no background read (store_up ${valueOf(last, 'license_server_store_up')} at the end; seats in use ${seats})`
      : `background read of the store's figures: ${readSeconds.toFixed(2)} s (the last; the first took ${seconds2(valueOf(first, 'license_server_store_read_duration_seconds'))}), then a wait of ${spacing.toFixed(0)} s: ${((100 * readSeconds) / (readSeconds + spacing)).toFixed(1)} % of the time; figures ${age.toFixed(0)} s old at the end; store_up ${valueOf(last, 'license_server_store_up')}; seats in use ${seats}`,
  );
  console.log(`scrape, idle (50): median ${quantile(idle, 0.5).toFixed(1)} ms, p95 ${quantile(idle, 0.95).toFixed(1)} ms, max ${idle.at(-1).toFixed(1)} ms; the daemon's CPU per scrape ${cpuPerScrape.toFixed(1)} ms (${((100 * cpuPerScrape) / scrapeEvery).toFixed(2)} % of a core at one scrape per ${scrapeEvery} ms)`);
  console.log(`scrape, under load (${during.length}): median ${quantile(during, 0.5).toFixed(1)} ms, max ${during.at(-1).toFixed(1)} ms`);
  console.log(`validations/s without scraping (A): ${a.map((run) => run.rps.toFixed(0)).join(', ')} (p99 ${a.map((run) => run.p99).join(', ')} ms)`);
  console.log(`validations/s with a scrape every ${scrapeEvery} ms (B): ${b.map((run) => run.rps.toFixed(0)).join(', ')} (p99 ${b.map((run) => run.p99).join(', ')} ms)`);
  const pairs = b.map((run, i) => (run.rps / ((a[i].rps + a[i + 1].rps) / 2)).toFixed(3));
  console.log(`ratio with/without scraping: ${(mean(b) / mean(a)).toFixed(3)} (per round, B over the A's beside it: ${pairs.join(', ')})`);
}

async function smallStore() {
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
  await load(requests, 0); // warm-up
  const a1 = await load(requests, 0);
  const b = await load(requests, scrapeEvery);
  const a2 = await load(requests, 0);

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
  console.log(`validations/s with a scrape every ${scrapeEvery} ms: ${b.rps.toFixed(0)} (p99 ${b.p99} ms, ${b.scrapes.length} scrapes)`);
  console.log(`ratio with/without scraping: ${(b.rps / ((a1.rps + a2.rps) / 2)).toFixed(3)}`);
}
