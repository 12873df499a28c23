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
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BARE_REQUEST, BASELINE_SOURCE, adminToken, load as loadRoute, prepareLicense, startProcess } from './lib/daemon.mjs';

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
const start = (args, env) => startProcess(args, { cwd: dir, env, children });
const load = (url, request) => loadRoute(url, request, { seconds, connections });

try {
  const baseline = await start(['-e', BASELINE_SOURCE]);
  const serve = await start([cli, 'serve', '--port', '0'], {
    LICENSE_DATA_DIR: path.join(dir, 'data'),
    LICENSE_CLIENT_RATE_LIMIT: '0',
    ...(databaseUrl ? { LICENSE_DATABASE_URL: databaseUrl } : {}),
  });
  const token = adminToken(serve.out);
  const { checkout, validate } = await prepareLicense(serve.url, token, maxMachines ? { max_machines: Number(maxMachines), ...(floating ? { floating: true, lease_hours: 1 } : {}) } : {});

  // Warm-up: JIT, caches, connection pools.
  const short = seconds;
  const warm = (url, request) => loadRoute(url, request, { seconds: 2, connections });
  const bare = BARE_REQUEST;
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
