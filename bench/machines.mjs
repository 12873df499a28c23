#!/usr/bin/env node
// What machine tracking costs online validation, as a ratio to the validation before it
// existed, measured in the same run on SQLite and PostgreSQL:
//
//   npm run build && node bench/machines.mjs [--seconds 10] [--connections 50] [--baseline-ref 7087d4f]
//
// - baseline: `serve` of the release before machine tracking (git ref --baseline-ref, built
//   in a temporary worktree that borrows this checkout's node_modules), validating one
//   license from 1,000 distinct hardware IDs in turn;
// - tracked: this checkout's `serve`, the same traffic against a license with
//   max_machines 1000, so every machine is recorded, counted and admitted under the limit,
//   and then seen again and again (last_seen and leases written at most once a minute).
// Each server gets its own fresh database. Load comes from autocannon in this process.
// Goal (issue 12): tracked >= 0.8x the baseline's rate, p99 < 50 ms at 50 connections.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const seconds = Number(arg('seconds', 10));
const connections = Number(arg('connections', 50));
const baselineRef = arg('baseline-ref', '7087d4f');
const MACHINES = 1000;
const root = fileURLToPath(new URL('..', import.meta.url));
const work = mkdtempSync(path.join(tmpdir(), 'license-bench-machines-'));
const adminUrl = process.env.LICENSE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const children = [];
const databases = [];

/** The release before machine tracking, built beside this checkout. */
function buildBaseline() {
  const tree = path.join(work, 'baseline');
  execFileSync('git', ['worktree', 'add', '--detach', tree, baselineRef], { cwd: root, stdio: 'ignore' });
  symlinkSync(path.join(root, 'node_modules'), path.join(tree, 'node_modules'));
  execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: tree, stdio: 'ignore' });
  return path.join(tree, 'bin', 'run.js');
}

function serve(cli, databaseUrl) {
  const child = spawn(process.execPath, [cli, 'serve', '--port', '0'], {
    cwd: work,
    env: { ...process.env, LICENSE_DATABASE_URL: databaseUrl, LICENSE_CLIENT_RATE_LIMIT: '0' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      out += chunk;
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
      const token = /admin token \(shown only this once, store it now\): (\S+)/.exec(out)?.[1];
      if (url && token) resolve({ url, token, child });
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
  });
}

async function api(server, method, route, body) {
  const response = await fetch(server.url + route, {
    method,
    headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${method} ${route}: ${JSON.stringify(json)}`);
  return json;
}

async function freshUrl(engine) {
  if (engine === 'sqlite') return path.join(work, `db-${databases.length}-${Math.random().toString(36).slice(2)}`, 'license-server.db');
  const name = `license_bench_machines_${process.pid}_${databases.length}`;
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  databases.push(name);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** POST /api/v1/validate from MACHINES hardware IDs in turn, each request the next one. */
async function validations(server, license, duration) {
  let next = 0;
  const result = await autocannon({
    url: `${server.url}/api/v1/validate`,
    method: 'POST',
    connections,
    duration,
    headers: { 'content-type': 'application/json' },
    requests: [{
      setupRequest: (request) => ({
        ...request,
        body: JSON.stringify({ license_key: license.key, hardware_id: `bench-machine-${String(next++ % MACHINES).padStart(4, '0')}`, version: '1.0.0' }),
      }),
    }],
  });
  return { rate: result.requests.average, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

async function measure(cli, engine, terms) {
  const server = await serve(cli, await freshUrl(engine));
  const customer = await api(server, 'POST', '/api/customers', { name: 'Bench & Co' });
  await api(server, 'POST', '/api/entitlements', { code: 'seats', name: 'Seats' });
  const license = await api(server, 'POST', '/api/licenses', {
    customer_id: customer.id, type: 'hybrid', valid_until: '2099-12-31', entitlements: [{ code: 'seats', usage_limit: 25 }], with_decryption_key: true, ...terms,
  });
  // Warm-up: JIT, pools, every machine seen once, and the database settled after the 1,000
  // first admissions (PostgreSQL auto-analyzes the new rows).
  await validations(server, license, 5);
  const result = await validations(server, license, seconds);
  server.child.kill('SIGTERM');
  await new Promise((resolve) => server.child.once('exit', resolve));
  return result;
}

let failed = false;
try {
  const baselineCli = buildBaseline();
  const currentCli = path.join(root, 'bin', 'run.js');
  console.log(`node ${process.version}, ${connections} connections, ${seconds} s each, ${MACHINES} machines cycling, baseline ${baselineRef}`);
  for (const engine of ['sqlite', 'postgres']) {
    const baseline = await measure(baselineCli, engine, {});
    const tracked = await measure(currentCli, engine, { max_machines: MACHINES });
    const ratio = tracked.rate / baseline.rate;
    const row = (name, r, verdict = '') =>
      console.log(`${engine.padEnd(9)} ${name.padEnd(34)} ${r.rate.toFixed(0).padStart(6)}/s  p99 ${String(r.p99).padStart(4)} ms  non-2xx ${r.non2xx}  errors ${r.errors}${verdict}`);
    row(`validate, before machines`, baseline);
    const met = ratio >= 0.8 && tracked.p99 < 50 && tracked.non2xx === 0 && baseline.non2xx === 0;
    row(`validate, machines tracked`, tracked, `  ${ratio.toFixed(2)}x  ${met ? 'met' : 'MISSED'} (>= 0.80x, p99 < 50 ms)`);
    failed ||= !met;
  }
} finally {
  for (const child of children) child.kill('SIGTERM');
  execFileSync('git', ['worktree', 'remove', '--force', path.join(work, 'baseline')], { cwd: root, stdio: 'ignore' });
  if (databases.length) {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    for (const name of databases) await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.end();
  }
  rmSync(work, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
