import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { openDatabase } from '../../src/lib/storage/open.js';
import { CLI, ok, runCli, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { eventually } from '../support/fake-clock.js';
import { startReceiver } from '../support/receiver.js';
import { startServe, type ServeProcess } from '../support/serve.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const KEY = 'cd'.repeat(32);

/**
 * The warning docs/notifications.md shows for a delivery still pending after a command
 * ("Command lines"), as a pattern: its event, webhook and wording literally; the reason, the
 * next retry and the delivery id as they come.
 */
function documentedPendingWarning(): RegExp {
  const docs = readFileSync(path.join(root, 'docs', 'notifications.md'), 'utf8');
  const line = docs.split('\n').find((candidate) => /^warning: backup\.succeeded to webhook "ops" is pending \(/.test(candidate));
  assert.ok(line, 'docs/notifications.md shows the warning of a pending delivery');
  const escaped = line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped
    .replace(/\\\([A-Z0-9 ]+\\\); it will/, '\\((?<reason>.+)\\); it will')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\\\.\d{3}Z/, '(?<next>\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z)')
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/, '(?<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})')}$`);
}

/**
 * Issue 35, item 13: a cron job's `backup create` beside a running `serve`. The daemon polls
 * the outbox and may claim the command's notification between the command's commit and its
 * own attempt; the command then says what came of it, as if it had sent it itself: nothing
 * when it was delivered, the documented warning when it was not.
 *
 * The race is made to go the daemon's way every time: a preloaded module stops (SIGSTOP) the
 * command just before its own delivery attempt, and the test lets it go on once the daemon
 * has delivered, or tried.
 */
forEachEngine('backup create beside a running serve', (fixture) => {
  let work: string;
  let env: Record<string, string>;
  let serve: ServeProcess;
  let answer = 204;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let hook: string;

  before(async function () {
    this.timeout(60_000);
    work = mkdtempSync(path.join(tmpdir(), 'license-beside-serve-'));
    receiver = await startReceiver(() => answer);
    env = {
      LICENSE_DATABASE_URL: await fixture.freshUrl(),
      LICENSE_DATA_DIR: path.join(work, 'data'),
      LICENSE_BACKUP_PATH: path.join(work, 'backups'),
      LICENSE_BACKUP_ENCRYPTION_KEY: KEY,
    };
    ok(await runCli(['init'], { env, cwd: work }));
    writeFileSync(path.join(work, 'n.json'), JSON.stringify({ webhooks: [{ name: 'ops', url: receiver.url, secret: 'beside-serve-secret-0123456789' }], rules: [{ event: 'backup.*', webhook: 'ops' }] }));
    ok(await runCli(['notifications', 'set', '--file', path.join(work, 'n.json')], { env, cwd: work }));
    serve = await startServe(env);
    hook = path.join(work, 'hold-before-delivery.mjs');
    writeFileSync(hook, `import { writeFileSync } from 'node:fs';
const { Deliverer } = await import(${JSON.stringify(pathToFileURL(path.join(root, 'dist', 'lib', 'notifications', 'deliverer.js')).href)});
const deliverDue = Deliverer.prototype.deliverDue;
let held = false;
Deliverer.prototype.deliverDue = function (options) {
  if (!held && options?.ids) {
    held = true;
    writeFileSync(process.env.HOLD_MARKER, String(process.pid));
    process.kill(process.pid, 'SIGSTOP');
  }
  return deliverDue.call(this, options);
};
`);
  });
  after(async () => {
    await serve?.stop('SIGKILL');
    await receiver?.close();
    rmSync(work, { recursive: true, force: true });
  });
  beforeEach(() => {
    answer = 204;
  });

  /** The backup.succeeded delivery of `backupId`, as the outbox holds it now. */
  const delivery = async (backupId: string) => {
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      const rows = await db.query<{ id: string; status: string; attempts: number; next_attempt_at: unknown; claimed_by: string | null; data: string }>(
        "SELECT id, status, attempts, next_attempt_at, claimed_by, data FROM notification_deliveries WHERE event = 'backup.succeeded'");
      return rows.map((row) => ({ ...row, attempts: Number(row.attempts) })).find((row) => JSON.parse(String(row.data)).backup_id === backupId);
    } finally {
      await db.close();
    }
  };
  const newest = async () => {
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      const rows = await db.query<{ data: string }>("SELECT data FROM notification_deliveries WHERE event = 'backup.succeeded' ORDER BY created_at DESC, id LIMIT 1");
      return rows[0] ? String(JSON.parse(String(rows[0].data)).backup_id) : undefined;
    } finally {
      await db.close();
    }
  };
  const received = (backupId: string) => receiver.received.filter((request) => JSON.parse(request.body).data.backup_id === backupId);

  /** `backup create`, held before its own delivery until `release` resolves. */
  async function heldBackup(release: (backupId: string) => Promise<void>): Promise<CliResult & { backupId: string }> {
    const marker = path.join(work, `held-${Date.now()}`);
    const clean: Record<string, string> = {};
    for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) clean[name] = value;
    const child = spawn(process.execPath, ['--import', hook, CLI, 'backup', 'create'], { cwd: work, env: { ...clean, ...env, HOLD_MARKER: marker }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    try {
      await eventually(() => existsSync(marker) || child.exitCode !== null, 'the command stopped before its delivery', 30_000);
      assert.ok(existsSync(marker), `the command ended before its delivery: ${stderr}`);
      const backupId = (await newest())!;
      await release(backupId);
      child.kill('SIGCONT');
      const code = await exited;
      return { code, stdout, stderr, backupId, json: () => JSON.parse(stdout) };
    } finally {
      child.kill('SIGCONT');
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }

  const summaryOnly = (result: CliResult) => {
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, '', 'nothing on standard error');
    assert.match(result.stdout, /^created backup \S+: [^\n]*, encrypted, verified \([^\n]*\)\n$/);
  };

  it('prints only its summary line, whether it sent its notification or serve did', async function () {
    this.timeout(90_000);
    for (let i = 0; i < 2; i += 1) {
      const alone = await runCli(['backup', 'create'], { env, cwd: work });
      summaryOnly(alone);
      const backupId = /^created backup (\S+):/.exec(alone.stdout)![1]!;
      await eventually(async () => (await delivery(backupId))?.status === 'delivered', 'its backup.succeeded delivered', 20_000);
    }

    const raced = await heldBackup(async (backupId) => {
      await eventually(async () => (await delivery(backupId))?.status === 'delivered', 'serve delivered the held command\'s backup.succeeded', 20_000);
    });
    summaryOnly(raced);
    assert.equal(received(raced.backupId).length, 1, 'delivered once, by serve');
  });

  it('waits for the answer to serve\'s attempt in flight, and prints nothing once it was delivered', async function () {
    this.timeout(90_000);
    // The receiver takes its time: the command comes back while serve's attempt is under way.
    const slow = createServer((request, response) => {
      request.resume().on('end', () => setTimeout(() => response.writeHead(204).end(), 1500));
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/hook`;
    writeFileSync(path.join(work, 'slow.json'), JSON.stringify({ webhooks: [{ name: 'ops', url: slowUrl, secret: '[redacted]' }], rules: [{ event: 'backup.*', webhook: 'ops' }] }));
    ok(await runCli(['notifications', 'set', '--file', path.join(work, 'slow.json')], { env, cwd: work }));
    try {
      const raced = await heldBackup(async (backupId) => {
        await eventually(async () => (await delivery(backupId))?.claimed_by != null, 'serve claimed the held command\'s backup.succeeded', 20_000);
      });
      summaryOnly(raced);
      assert.equal((await delivery(raced.backupId))!.status, 'delivered');
    } finally {
      writeFileSync(path.join(work, 'back.json'), JSON.stringify({ webhooks: [{ name: 'ops', url: receiver.url, secret: '[redacted]' }], rules: [{ event: 'backup.*', webhook: 'ops' }] }));
      ok(await runCli(['notifications', 'set', '--file', path.join(work, 'back.json')], { env, cwd: work }));
      await new Promise<void>((resolve) => slow.close(() => resolve()));
    }
  });

  it('prints the documented warning when the delivery serve attempted failed', async function () {
    this.timeout(90_000);
    answer = 500;
    const raced = await heldBackup(async (backupId) => {
      await eventually(async () => (await delivery(backupId))?.attempts === 1, 'serve attempted the held command\'s backup.succeeded', 20_000);
    });
    assert.equal(raced.code, 0, 'a notification never changes the exit code');
    assert.match(raced.stdout, /^created backup \S+: [^\n]*\n$/);
    const row = (await delivery(raced.backupId))!;
    assert.equal(row.status, 'pending');
    const lines = raced.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, raced.stderr);
    const match = documentedPendingWarning().exec(lines[0]!);
    assert.ok(match, `${lines[0]}\nis not the warning docs/notifications.md shows`);
    assert.equal(match.groups!.reason, 'HTTP 500');
    assert.equal(match.groups!.id, row.id);
    assert.equal(new Date(match.groups!.next!).getTime(), new Date(String(row.next_attempt_at instanceof Date ? row.next_attempt_at.toISOString() : row.next_attempt_at)).getTime());
    assert.equal(received(raced.backupId).length, 1, 'tried once, by serve; the command left it to the retry schedule');
  });
});
