#!/usr/bin/env node
// What continuous replication (issue 37) costs the request path, on SQLite, as a ratio in one run:
//
//   npm run build && node bench/replication.mjs [--seconds 5] [--rounds 3] [--connections 20]
//
// Two `serve` processes of this checkout, each on its own fresh database: one plain, one with
// backup.replication to a file target (Litestream 0.3 beside it, 1 s sync interval, age
// encryption). In each round both are loaded in turn, the order alternating, with validations
// and then checkouts (each checkout writes its record and its audit entry, which Litestream
// ships). While the replicated daemon takes checkouts, its GET /api/backups/status is read
// every 250 ms for the replica's lag.
// Goals (issue 37): validations and checkouts at least 0.9x of the plain daemon's, and the
// replication lag's p99 under 2 s at the bench's write rate.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminToken, load, prepareLicense, startProcess } from './lib/daemon.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const seconds = Number(arg('seconds', 5));
const rounds = Number(arg('rounds', 3));
const connections = Number(arg('connections', 20));
const root = fileURLToPath(new URL('..', import.meta.url));
const cli = path.join(root, 'bin', 'run.js');
const work = mkdtempSync(path.join(tmpdir(), 'license-bench-replication-'));
const children = [];

async function daemon(name, env) {
  const dataDir = path.join(work, name);
  const { url, out } = await startProcess([cli, 'serve', '--port', '0'], {
    cwd: work,
    children,
    env: { LICENSE_DATA_DIR: dataDir, LICENSE_CLIENT_RATE_LIMIT: '0', LICENSE_BACKUP_ENCRYPTION_KEY: '07'.repeat(32), ...env },
  });
  const token = adminToken(out);
  return { name, url, token, requests: await prepareLicense(url, token) };
}

async function replicationStatus(server) {
  const response = await fetch(`${server.url}/api/backups/status`, { headers: { authorization: `Bearer ${server.token}` } });
  return (await response.json()).replication;
}

/** Reads the replica's lag every 250 ms until `stop` resolves. */
async function sampleLag(server, stop) {
  const samples = [];
  let done = false;
  void stop.then(() => (done = true));
  while (!done) {
    const status = await replicationStatus(server);
    const lag = status?.replicas[0]?.lag_seconds;
    if (typeof lag === 'number') samples.push(lag);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return samples;
}

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const median = (values) => quantile(values, 0.5);

try {
  const plain = await daemon('plain', {});
  const replicated = await daemon('replicated', {
    LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'offsite', kind: 'file', path: path.join(work, 'offsite') }]),
    LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite',
  });
  const ratios = { validate: [], checkout: [] };
  const lags = [];
  const rows = [];
  for (let round = 0; round < rounds; round += 1) {
    const order = round % 2 === 0 ? [plain, replicated] : [replicated, plain];
    const result = {};
    for (const kind of ['validate', 'checkout']) {
      for (const server of order) {
        let stop;
        const stopped = new Promise((resolve) => (stop = resolve));
        const sampling = server === replicated && kind === 'checkout' ? sampleLag(server, stopped) : Promise.resolve([]);
        const measured = await load(server.url, server.requests[kind], { seconds, connections });
        stop();
        lags.push(...await sampling);
        if (measured.non2xx > 0 || measured.errors > 0) throw new Error(`${server.name} ${kind}: ${measured.non2xx} non-2xx, ${measured.errors} errors`);
        result[`${server.name} ${kind}`] = measured;
      }
      ratios[kind].push(result[`replicated ${kind}`].rate / result[`plain ${kind}`].rate);
    }
    rows.push(result);
    console.log(`round ${round + 1}: ` + Object.entries(result).map(([name, measured]) => `${name} ${measured.rate.toFixed(0)}/s p99 ${measured.p99} ms`).join(', '));
  }
  const status = await replicationStatus(replicated);
  console.log(`\nreplicated / plain (median of ${rounds} rounds): validate ${median(ratios.validate).toFixed(2)}x [${ratios.validate.map((r) => r.toFixed(2)).join(', ')}], checkout ${median(ratios.checkout).toFixed(2)}x [${ratios.checkout.map((r) => r.toFixed(2)).join(', ')}] (goal >= 0.9x)`);
  console.log(`replication lag during checkouts: p50 ${quantile(lags, 0.5)} s, p99 ${quantile(lags, 0.99)} s, max ${Math.max(...lags)} s over ${lags.length} samples (goal p99 < 2 s); Litestream restarts ${status.restarts}, errors ${status.replicas[0].errors}`);
} finally {
  for (const child of children) child.kill('SIGKILL');
  // Litestream outlives its killed serve by up to a second, still writing into the target.
  rmSync(work, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
}
