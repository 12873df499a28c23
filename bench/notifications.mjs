#!/usr/bin/env node
// What alert rules cost license creation over the API, as a ratio measured in one run:
//
//   npm run build && node bench/notifications.mjs [--licenses 300] [--rounds 3] [--concurrency 8]
//     [--database-url postgres://.../empty-db] [--cli path/to/bin/run.js]
//
// One real `license-server serve` (SQLite by default), one webhook receiver (its own process,
// answering 204). Rounds alternate A, B, B, A, ...:
// - A: no notification settings at all;
// - B: a realistic set (two webhooks, seven rules over license, machine, usage and backup
//   events, two email templates), so that each license.created has two webhook deliveries,
//   which the daemon sends while the next licenses are being created.
// Each round creates --licenses licenses with --concurrency requests in flight, then waits for
// the outbox to drain (so that a B round's deliveries do not slow the next round). The rates
// are licenses created per second; the ratio is B's median over A's. Beside it, the daemon's
// CPU per license (/proc, its deliveries included), which a machine shared with other work
// disturbs less than a rate.
// Raising an event costs the license's transaction one query and one INSERT (issue 35; guarded
// by test/lib/notifications/raise-cost.test.ts). What B costs beyond that is sending: the daemon
// POSTs each delivery on a connection of its own, in the same process that serves the API.
// --cli runs another build (an older checkout's bin/run.js) to compare before and after.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminToken, startProcess } from './lib/daemon.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const licenses = Number(arg('licenses', 300));
const rounds = Number(arg('rounds', 3));
const concurrency = Number(arg('concurrency', 8));
const databaseUrl = arg('database-url', undefined);
const cli = path.resolve(arg('cli', fileURLToPath(new URL('../bin/run.js', import.meta.url))));
const dir = mkdtempSync(path.join(tmpdir(), 'license-bench-notifications-'));
const env = {
  ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('LICENSE_'))),
  LICENSE_DATA_DIR: path.join(dir, 'data'),
  LICENSE_CLIENT_RATE_LIMIT: '0',
  ...(databaseUrl ? { LICENSE_DATABASE_URL: databaseUrl } : {}),
};
const children = [];

const start = (args, extraEnv = {}) => startProcess(args, { cwd: dir, env: { ...env, ...extraEnv }, children });

/**
 * CPU seconds (user + system) a process has used, from /proc (Linux): steadier than rates on a
 * machine that others share, since it counts the daemon's own work wherever it waited.
 */
function cpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

const RECEIVER = `
const server = require('node:http').createServer((req, res) => {
  req.resume().on('end', () => res.writeHead(204).end());
});
server.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + server.address().port));
`;

async function api(url, token, method, route, body) {
  const response = await fetch(url + route, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${await response.text()}`);
  return response.json();
}

function setNotifications(document) {
  const file = path.join(dir, 'notifications.json');
  writeFileSync(file, JSON.stringify(document));
  execFileSync(process.execPath, [cli, 'notifications', 'set', '--file', file], { cwd: dir, env, stdio: ['ignore', 'ignore', 'inherit'] });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

try {
  const receiver = await start(['-e', RECEIVER]);
  execFileSync(process.execPath, [cli, 'init'], { cwd: dir, env, stdio: 'ignore' });
  const serve = await start([cli, 'serve', '--port', '0']);
  const daemon = children.at(-1);
  const token = adminToken(serve.out);
  const customer = await api(serve.url, token, 'POST', '/api/customers', { name: 'Bench & Co', email: 'buyer@bench.example' });
  await api(serve.url, token, 'POST', '/api/entitlements', { code: 'export', name: 'Export' });

  const none = { webhooks: [], rules: [], email_templates: [] };
  const realistic = {
    webhooks: [{ name: 'ops', url: `${receiver.url}/ops` }, { name: 'crm', url: `${receiver.url}/crm` }],
    rules: [
      { event: 'license.*', webhook: 'ops' },
      { event: 'license.created', webhook: 'crm' },
      { event: 'machine.limit_exceeded', email: 'sales@bench.example' },
      { event: 'license.expiring_soon', email: 'customer' },
      { event: 'usage.threshold', webhook: 'crm' },
      { event: 'backup.*', webhook: 'ops' },
      { event: 'backup.failed', email: 'ops@bench.example' },
    ],
    email_templates: [
      { event: 'license.expiring_soon', subject: 'Your license {{license_key_prefix}} expires soon', body: 'Dear {{customer_name}}, ...' },
      { event: 'backup.failed', subject: 'Backup failed on {{server}}', body: '{{error}}' },
    ],
  };

  const pending = async () => (await api(serve.url, token, 'GET', '/api/notifications/deliveries?status=pending&limit=1', undefined)).length;
  async function round(withRules) {
    setNotifications(withRules ? realistic : none);
    let next = 0;
    const cpuBefore = cpuSeconds(daemon.pid);
    const started = process.hrtime.bigint();
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < licenses) {
        next += 1;
        await api(serve.url, token, 'POST', '/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: '2099-12-31', max_machines: 3, entitlements: [{ code: 'export' }] });
      }
    }));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const drainStarted = Date.now();
    while ((await pending()) > 0) await new Promise((resolve) => setTimeout(resolve, 50));
    // The daemon's CPU for the licenses and for sending their notifications.
    return { rate: licenses / seconds, drainMs: Date.now() - drainStarted, cpuMs: ((cpuSeconds(daemon.pid) - cpuBefore) * 1000) / licenses };
  }

  // Warm-up: JIT, caches, the first deliveries.
  await round(true);
  await round(false);
  const results = { A: [], B: [] };
  for (let i = 0; i < rounds; i += 1) {
    for (const mode of i % 2 === 0 ? ['A', 'B'] : ['B', 'A']) {
      const result = await round(mode === 'B');
      results[mode].push(result);
      console.log(`round ${i + 1} ${mode === 'A' ? 'A (no rules)' : 'B (rules)   '}: ${result.rate.toFixed(0).padStart(5)} licenses/s, daemon CPU ${result.cpuMs.toFixed(2)} ms per license, outbox drained ${result.drainMs} ms after the last`);
    }
  }
  const a = median(results.A.map((r) => r.rate));
  const b = median(results.B.map((r) => r.rate));
  const ratio = b / a;
  const cpuA = median(results.A.map((r) => r.cpuMs));
  const cpuB = median(results.B.map((r) => r.cpuMs));
  console.log(`node ${process.version}, ${databaseUrl ? 'PostgreSQL' : 'SQLite'}, ${licenses} licenses per round, ${concurrency} in flight, ${rounds} rounds each, ${cli}`);
  console.log(`median: A (no rules) ${a.toFixed(0)}/s, B (rules: 2 webhook deliveries per license) ${b.toFixed(0)}/s, ratio B/A ${ratio.toFixed(2)}`);
  console.log(`daemon CPU per license, its deliveries included: A ${cpuA.toFixed(2)} ms, B ${cpuB.toFixed(2)} ms (B/A ${(cpuB / cpuA).toFixed(2)})`);
} finally {
  for (const child of children) child.kill('SIGTERM');
  setTimeout(() => rmSync(dir, { recursive: true, force: true }), 500);
}
