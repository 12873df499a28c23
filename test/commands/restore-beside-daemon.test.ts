import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { scaledMs } from '../support/busy-machine.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { lostWrites, pauseWhenBackupBegins, startCli, waitUntil, writeCustomers, type Writes } from '../support/restore-race.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const KEY = 'ef'.repeat(32);
const TOKEN = 'restore-beside-daemon-token-0123456789';
const WAITING = /a restore of the database is running; waiting for it to finish/;

/**
 * Issue 16, item 1: a restore beside a daemon never loses a write the daemon acknowledged.
 * Every restore here is stopped (SIGSTOP) right after its check for daemons, when its
 * pre-restore backup begins, so that whatever may slip in beside it does so every time.
 */
forEachEngine('a restore beside a daemon', (fixture) => {
  const work = mkdtempSync(path.join(tmpdir(), 'license-restore-daemon-'));
  after(() => rmSync(work, { recursive: true, force: true }));
  let stores = 0;

  /** A store with a customer and one backup of it. */
  async function store(): Promise<{ env: Record<string, string>; url: string; backupId: string }> {
    stores += 1;
    const url = await fixture.freshUrl();
    const env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, `backups-${stores}`), LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_ADMIN_TOKEN: TOKEN };
    ok(await runCli(['init'], { env }));
    ok(await runCli(['customer', 'create', '--name', 'before the backup'], { env }));
    const backupId = ok(await runCli(['backup', 'create', '--json'], { env })).json().backup_id as string;
    return { env, url, backupId };
  }

  it('a daemon started while a restore runs waits for it, then serves the restored data; one that may not wait that long refuses', async () => {
    const { env, url, backupId } = await store();
    const restore = startCli(['backup', 'restore', backupId, '--yes'], env);
    const caught = await pauseWhenBackupBegins(env.LICENSE_BACKUP_PATH!, restore);
    if (!caught) assert.fail(`the restore ended before it could be stopped past its check for daemons: ${(await restore.exited).stderr}`);
    let waiting = false;
    const impatient = startServe({ ...env, LICENSE_RESTORE_WAIT: '1' }).then(
      (serve) => ({ serve, error: undefined }),
      (error: Error) => ({ serve: undefined, error }),
    );
    const serving = startServe(env, [], (_out, err) => (waiting ||= WAITING.test(err)));
    let serve: ServeProcess | undefined;
    const writes: Writes = { acknowledged: [], refused: [] };
    const writer = serving.then((started) => {
      serve = started;
      return writeCustomers(started.url, TOKEN, () => restore.done, 10, writes);
    });
    try {
      await Promise.race([serving, waitUntil(() => waiting, 20_000, 'the daemon to start or wait')]);
      // Before the fix the daemon served the data being replaced from here on.
      if (!waiting) await waitUntil(() => writes.acknowledged.length >= 5, 10_000, 'writes to the daemon');
      const refused = await impatient;
      await refused.serve?.stop();
      restore.resume();
      const restored = await restore.exited;
      assert.equal(restored.code, 0, restored.stderr);
      await writer;
    } finally {
      restore.resume();
      await serve?.stop();
      await (await impatient).serve?.stop();
    }
    const lost = await lostWrites(url, writes);
    assert.deepEqual(lost, [], `${lost.length} of the ${writes.acknowledged.length} writes answered 201 are not in the database`);
    assert.ok(writes.acknowledged.length >= 10, `the daemon served after the restore (${JSON.stringify(writes.refused.slice(0, 3))})`);
    assert.ok(waiting, `the daemon logged that it waited for the restore: ${serve?.stderr()}`);
    const refused = await impatient;
    assert.ok(refused.error, 'a daemon with server.restore_wait 1 refused to start');
    assert.match(refused.error.message, /exited with 7 before listening/);
    assert.match(refused.error.message, /RESTORE_IN_PROGRESS/);
  });

  it('a running daemon, idle and then written to during a restore: the restore is refused (DATABASE_IN_USE), every 201 is kept', async () => {
    const { env, url, backupId } = await store();
    const serve = await startServe(env);
    const writes: Writes = { acknowledged: [], refused: [] };
    try {
      await writeCustomers(serve.url, TOKEN, () => true, 3, writes);
      // The daemon's pool closes idle connections after 10 s; closing them now is the same
      // state without the wait: a daemon with no connection to its database.
      if (fixture.engine === 'postgres') await closeIdleDaemonConnections(url);
      const restore = startCli(['backup', 'restore', backupId, '--yes'], env);
      if (await pauseWhenBackupBegins(env.LICENSE_BACKUP_PATH!, restore)) {
        // Past its check: what the daemon acknowledges now must survive the swap.
        try {
          await writeCustomers(serve.url, TOKEN, () => true, 10, writes);
        } finally {
          restore.resume();
        }
      }
      await writeCustomers(serve.url, TOKEN, () => restore.done, 10, writes);
      const idle = await restore.exited;
      // And once more while the daemon is busy: writes during the whole restore.
      const busy = startCli(['backup', 'restore', backupId, '--yes'], env);
      await writeCustomers(serve.url, TOKEN, () => busy.done, 5, writes);
      const lost = await lostWrites(url, writes);
      assert.deepEqual(lost, [], `${lost.length} of the ${writes.acknowledged.length} writes answered 201 are not in the database`);
      for (const result of [idle, await busy.exited]) {
        assert.equal(result.code, 5, `exit ${result.code}: ${result.stderr}`);
        assert.match(result.stderr, /DATABASE_IN_USE/);
        // The daemon's own process, as on SQLite, not the PostgreSQL backend serving its lock (issue 23, item 14).
        assert.match(result.stderr, fixture.engine === 'postgres' ? daemonNamed(serve.child.pid!) : new RegExp(`process ${serve.child.pid}`));
      }
    } finally {
      await serve.stop();
    }
    assert.deepEqual(writes.refused, []);
  });

  it('a restore through one daemon refuses while another daemon serves the same database, naming it', async () => {
    const { env } = await store();
    const first = await startServe(env);
    const second = await startServe(env);
    try {
      const backup = await api(first.url, 'POST', '/api/backups', { token: TOKEN });
      assert.equal(backup.status, 201, backup.text);
      const id = backup.body.backup_id as string;
      const refused = await api(first.url, 'POST', `/api/backups/${id}/restore`, { token: TOKEN, body: { confirm: id } });
      assert.equal(refused.status, 409, refused.text);
      assert.equal(refused.body.error.code, 'DATABASE_IN_USE');
      assert.match(refused.body.error.message, fixture.engine === 'postgres' ? daemonNamed(second.child.pid!) : new RegExp(`process ${second.child.pid}`));
      // Both still serve, and the first holds its share again: a command-line restore still sees both.
      for (const serve of [first, second]) assert.equal((await api(serve.url, 'POST', '/api/customers', { token: TOKEN, body: { name: 'after' } })).status, 201);
      await second.stop();
      const restored = await api(first.url, 'POST', `/api/backups/${id}/restore`, { token: TOKEN, body: { confirm: id } });
      assert.equal(restored.status, 200, restored.text);
      assert.equal((await api(first.url, 'POST', '/api/customers', { token: TOKEN, body: { name: 'after the restore' } })).status, 201);
      const cli = await runCli(['backup', 'restore', id, '--yes'], { env });
      assert.equal(cli.code, 5, cli.stderr);
    } finally {
      await second.stop();
      await first.stop();
    }
  });

  if (fixture.engine === 'postgres') postgresLockLoss(store);
});

/** How DATABASE_IN_USE names a PostgreSQL daemon: its pid and host, then the connection that holds its lock. */
function daemonNamed(pid: number): RegExp {
  return new RegExp(`license-server serve: process ${pid} on ${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, connected from 127\\.0\\.0\\.1 as server pid \\d+`);
}

// As in src/lib/backup/locks/daemon-lock-postgres.ts.
const PG_DAEMON_LOCK = 0x4c53_5356;

function postgresLockLoss(store: () => Promise<{ env: Record<string, string>; url: string; backupId: string }>): void {
  it('a daemon whose lock connection ends refuses requests (503) until it holds the lock again, and a restore may run meanwhile', async () => {
    const { env, url } = await store();
    const serve = await startServe(env);
    const restore = new pg.Client({ connectionString: url, application_name: 'test restore' });
    await restore.connect();
    const writes: Writes = { acknowledged: [], refused: [] };
    try {
      await writeCustomers(serve.url, TOKEN, () => true, 3, writes);
      // Cut the daemon's lock connection, and take the lock as a restore would before the daemon takes it back.
      let taken = false;
      for (let attempt = 0; attempt < 5 && !taken; attempt += 1) {
        const { rows } = await restore.query<{ pid: number }>(
          "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid::bigint = $1 AND mode = 'ShareLock' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
          [PG_DAEMON_LOCK],
        );
        assert.equal(rows.length, 1, 'the daemon holds its lock on a connection of its own');
        await restore.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        for (let i = 0; i < 100 && !taken; i += 1) {
          taken = (await restore.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [PG_DAEMON_LOCK])).rows[0]!.locked;
          if (!taken) await new Promise((resolve) => setTimeout(resolve, 5));
        }
      }
      assert.ok(taken, 'the lock was free once the daemon lost it');
      // The daemon hears of its lost connection a moment later, as a restore's first step follows its lock by more.
      await waitFor503(serve.url);
      const fenced = await api(serve.url, 'POST', '/api/customers', { token: TOKEN, body: { name: 'while fenced' } });
      assert.equal(fenced.status, 503, fenced.text);
      assert.equal(fenced.body.error.code, 'DATABASE_UNAVAILABLE');
      assert.equal((await api(serve.url, 'GET', '/readyz')).status, 503);
      assert.equal((await api(serve.url, 'GET', '/healthz')).status, 200);
      // Still refused a second later: the daemon retries, and waits while the "restore" holds the lock.
      await new Promise((resolve) => setTimeout(resolve, 1200));
      assert.equal((await api(serve.url, 'GET', '/readyz')).status, 503);
      await restore.query('SELECT pg_advisory_unlock($1)', [PG_DAEMON_LOCK]);
      const deadline = Date.now() + scaledMs(10_000);
      while ((await api(serve.url, 'GET', '/readyz')).status !== 200) {
        assert.ok(Date.now() < deadline, 'the daemon serves again once it holds the lock');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await writeCustomers(serve.url, TOKEN, () => true, 3, writes);
      assert.match(serve.stderr(), /lost the database lock/);
      assert.match(serve.stderr(), /holding the database lock again; serving/);
    } finally {
      await restore.end();
      await serve.stop();
    }
    assert.deepEqual(writes.refused, []);
    assert.deepEqual(await lostWrites(url, writes), []);
  });
}

async function waitFor503(base: string): Promise<void> {
  const deadline = Date.now() + scaledMs(5000);
  while ((await api(base, 'GET', '/readyz')).status !== 503) {
    assert.ok(Date.now() < deadline, 'the daemon stopped serving once it lost its lock');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** What the pool's idle timeout does after 10 s: the daemon keeps no connection but its lock's. */
async function closeIdleDaemonConnections(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'license-server serve'
          AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')`,
    );
    const deadline = Date.now() + scaledMs(5000);
    for (;;) {
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'license-server serve'
            AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')`,
      );
      if (rows[0]!.n === 0) return;
      assert.ok(Date.now() < deadline, 'the daemon\'s pool connections are gone');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await client.end();
  }
}
