import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { listBackups } from '../../src/lib/backup/repository.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { startCli, type RunningCli } from '../support/restore-race.js';

const KEY = '5a'.repeat(32);

/**
 * Issue 16, item 2: the backup lock belongs to the database, not the backup directory. Two
 * hosts (or two LICENSE_BACKUP_PATH values) backing up one database must take turns.
 */
forEachEngine('backup work with two backup directories on one database', (fixture) => {
  const work = mkdtempSync(path.join(tmpdir(), 'license-backup-lock-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  it('a restore holds off a restore, a create and a prune from the other directory (BACKUP_IN_PROGRESS), and all finish afterwards', async () => {
    const url = await fixture.freshUrl();
    const env = (name: string) => ({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, name), LICENSE_BACKUP_ENCRYPTION_KEY: KEY });
    const [first, second] = [env('first'), env('second')];
    ok(await runCli(['init'], { env: first }));
    ok(await runCli(['customer', 'create', '--name', 'x'], { env: first }));
    const a = ok(await runCli(['backup', 'create', '--json'], { env: first })).json().backup_id as string;
    const b = ok(await runCli(['backup', 'create', '--json'], { env: second })).json().backup_id as string;
    // The restore's staging directory: beside the SQLite file, or in the backup directory for PostgreSQL.
    const staging = fixture.engine === 'sqlite' ? path.dirname(url) : first.LICENSE_BACKUP_PATH;
    const restore = startCli(['backup', 'restore', a, '--yes'], first);
    assert.ok(await pauseWhenStaging(staging, restore), 'the restore was stopped while it validates into its staging directory');
    try {
      for (const args of [['backup', 'restore', b, '--yes'], ['backup', 'create'], ['backup', 'prune']]) {
        const refused = await runCli(args, { env: second });
        assert.equal(refused.code, 5, `${args.join(' ')}: exit ${refused.code}\n${refused.stderr}`);
        assert.match(refused.stderr, /BACKUP_IN_PROGRESS/);
      }
    } finally {
      restore.resume();
    }
    const restored = await restore.exited;
    assert.equal(restored.code, 0, restored.stderr);
    assert.deepEqual((await listBackups(second.LICENSE_BACKUP_PATH)).map((backup) => backup.backup_id), [b]);
    ok(await runCli(['backup', 'restore', b, '--yes'], { env: second }));
    ok(await runCli(['backup', 'create'], { env: second }));
    assert.equal((await listBackups(first.LICENSE_BACKUP_PATH)).length, 2, 'the backup and the restore\'s pre-restore backup');
  });
});

/** SIGSTOPs `cli` as soon as a `.restore-*` staging directory appears in `directory`. */
function pauseWhenStaging(directory: string, cli: RunningCli): Promise<boolean> {
  return new Promise((resolve) => {
    const watcher = watch(directory, (_event, name) => {
      if (!String(name ?? '').startsWith('.restore-') || cli.done) return;
      cli.pause();
      watcher.close();
      resolve(readdirSync(directory).some((entry) => entry.startsWith('.restore-')));
    });
    void cli.exited.then(() => {
      watcher.close();
      resolve(false);
    });
  });
}
