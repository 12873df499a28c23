import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { ok, runCli, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { requireKind, TARGET_KINDS, type TargetPlace } from '../support/backup-targets.js';
import { openDatabase } from '../../src/lib/storage/open.js';

const ID = /created backup (\S+):/;

/** A host: its own data directory, backup directory and config.yaml naming the targets. */
function host(work: string, name: string, databaseUrl: string | undefined, key: string, targets: Array<Record<string, unknown>>, targetEnv: Record<string, string>) {
  const root = path.join(work, name);
  mkdirSync(root, { recursive: true });
  const config = path.join(root, 'config.yaml');
  writeFileSync(config, stringify({ backup: { targets } }));
  const env: Record<string, string> = {
    ...targetEnv,
    LICENSE_DATA_DIR: path.join(root, 'data'),
    LICENSE_CONFIG: config,
    LICENSE_BACKUP_PATH: path.join(root, 'backups'),
    LICENSE_BACKUP_ENCRYPTION_KEY: key,
    ...(databaseUrl ? { LICENSE_DATABASE_URL: databaseUrl } : {}),
  };
  return { root, env, cli: (...args: string[]) => runCli(args, { env, cwd: root }) };
}

function failedWith(result: CliResult, exit: number, code: string): CliResult {
  assert.equal(result.code, exit, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.match(result.stderr, new RegExp(`\\(${code}\\)`), result.stderr);
  return result;
}

for (const kind of TARGET_KINDS) {
  describe(`off-site copies to a ${kind.kind} target from the command line`, function () {
    this.timeout(120_000);
    let work: string;
    let place: TargetPlace;
    let key: string;
    before(async function () {
      requireKind(this, kind);
      work = mkdtempSync(path.join(tmpdir(), `license-targets-${kind.kind}-`));
      place = await kind.start();
      key = randomBytes(32).toString('hex');
    });
    after(async () => {
      await place?.stop();
      rmSync(work, { recursive: true, force: true });
    });

    it('copies each backup once it verified, lists it from the target, and reports the target fresh', async () => {
      const a = host(work, 'fresh', undefined, key, [{ name: 'offsite', ...place.entry }], place.env);
      ok(await a.cli('init'));
      const created = ok(await a.cli('backup', 'create'));
      assert.match(created.stdout, /; copied to offsite$/m);
      const id = ID.exec(created.stdout)![1]!;
      const listed = JSON.parse(ok(await a.cli('backup', 'list', '--target', 'offsite', '--json')).stdout);
      assert.deepEqual(listed.map((backup: { id: string }) => backup.id), [id]);
      const status = JSON.parse(ok(await a.cli('backup', 'status', '--max-age', '1h', '--json')).stdout);
      assert.deepEqual(status.map((p: { place: string; newest_backup_id: string; stale: boolean }) => [p.place, p.newest_backup_id, p.stale]), [
        ['local', id, false],
        ['offsite', id, false],
      ]);
      const validated = ok(await a.cli('backup', 'validate', id, '--target', 'offsite'));
      assert.match(validated.stdout, new RegExp(`backup ${id} is valid`));
    });

    it('keeps the backup and exits 16 naming the target when the copy fails, then catches up oldest first', async () => {
      const a = host(work, 'outage', undefined, key, [{ name: 'offsite', ...place.entry }], place.env);
      ok(await a.cli('init'));
      const before = JSON.parse(ok(await a.cli('backup', 'list', '--target', 'offsite', '--json')).stdout).length;
      await place.breakIt();
      let ids: string[];
      try {
        const first = failedWith(await a.cli('backup', 'create'), 16, 'BACKUP_COPY_FAILED');
        assert.match(first.stdout, /verified \(.*\); NOT copied to offsite \(\w[\w-]*: .+\)$/m);
        const second = failedWith(await a.cli('backup', 'create'), 16, 'BACKUP_COPY_FAILED');
        ids = [ID.exec(first.stdout)![1]!, ID.exec(second.stdout)![1]!];
        // Both made, verified and listed here.
        const local = JSON.parse(ok(await a.cli('backup', 'list', '--json')).stdout).map((backup: { id: string }) => backup.id);
        assert.deepEqual(local.slice(0, 2).sort(), [...ids].sort());
        const stale = failedWith(await a.cli('backup', 'status', '--place', 'offsite', '--max-age', '1h'), 17, 'BACKUP_STALE');
        assert.match(stale.stdout, /offsite/);
      } finally {
        await place.mendIt();
      }
      const caughtUp = JSON.parse(ok(await a.cli('backup', 'copy', '--missing', '--json')).stdout);
      assert.deepEqual(caughtUp.map((outcome: { backup_id: string; result: string }) => [outcome.backup_id, outcome.result]), ids.map((id) => [id, 'copied']));
      const listed = JSON.parse(ok(await a.cli('backup', 'list', '--target', 'offsite', '--json')).stdout);
      assert.equal(listed.length, before + 2);
      const status = JSON.parse(ok(await a.cli('backup', 'status', '--place', 'offsite', '--json')).stdout);
      assert.equal(status[0].last_error, null, 'a success clears the last error');
    });

    it('does not copy an unencrypted backup off the host unless the target allows it', async () => {
      const a = host(work, 'plain', undefined, key, [{ name: 'offsite', ...place.entry }, { name: 'allowed', ...place.entry, allow_unencrypted: true }], place.env);
      delete a.env.LICENSE_BACKUP_ENCRYPTION_KEY;
      ok(await a.cli('init'));
      const created = failedWith(await a.cli('backup', 'create'), 16, 'BACKUP_COPY_FAILED');
      assert.match(created.stdout, /copied to allowed; NOT copied to offsite \(unencrypted: the backup is not encrypted/);
    });
  });
}

describe('backup create --path', function () {
  this.timeout(60_000);
  it('refuses a directory that does not exist, and creates nothing (an unmounted disk)', async () => {
    const work = mkdtempSync(path.join(tmpdir(), 'license-path-'));
    try {
      const env = { LICENSE_DATA_DIR: path.join(work, 'data') };
      ok(await runCli(['init'], { env, cwd: work }));
      const missing = path.join(work, 'mnt', 'usb', 'backups');
      const result = failedWith(await runCli(['backup', 'create', '--path', missing], { env, cwd: work }), 12, 'FILE_WRITE_FAILED');
      assert.match(result.stderr, /does not exist; a directory given with --path is never created/);
      assert.deepEqual(readdirSync(work).sort(), ['data']);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

/**
 * The disaster: the host is lost with its data and its backups. A new host with only the
 * configuration, the backup key and the targets' credentials restores from each target, and
 * a license file signed before the loss still verifies against the restored store.
 */
forEachEngine('a host lost and restored from an off-site target', (fixture) => {
  for (const kind of TARGET_KINDS) {
    it(`restores everything from the ${kind.kind} target on a new, empty store`, async function () {
      this.timeout(180_000);
      requireKind(this, kind);
      const work = mkdtempSync(path.join(tmpdir(), `license-disaster-${kind.kind}-`));
      const place = await kind.start();
      try {
        const key = randomBytes(32).toString('hex');
        const targets = [{ name: 'offsite', ...place.entry }];
        const lost = host(work, 'lost', fixture.engine === 'postgres' ? await fixture.freshUrl() : undefined, key, targets, place.env);
        ok(await lost.cli('init'));
        const customer = JSON.parse(ok(await lost.cli('customer', 'create', '--name', 'Acme Air-Gapped', '--json')).stdout);
        const license = JSON.parse(ok(await lost.cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-01-01', '--json')).stdout);
        const licFile = path.join(work, 'customer.lic');
        ok(await lost.cli('license', 'checkout', license.id, '--ttl-days', '30', '--out', licFile));
        const created = ok(await lost.cli('backup', 'create'));
        assert.match(created.stdout, /; copied to offsite$/m);
        const id = ID.exec(created.stdout)![1]!;

        // The host is gone: its data directory, its backups and (on PostgreSQL) its database.
        rmSync(lost.root, { recursive: true, force: true });
        if (fixture.engine === 'postgres') {
          const db = await openDatabase(lost.env.LICENSE_DATABASE_URL!, { migrate: false });
          await db.execute('DROP SCHEMA public CASCADE');
          await db.execute('CREATE SCHEMA public');
          await db.close();
        }

        const fresh = host(work, 'new', fixture.engine === 'postgres' ? await fixture.freshUrl() : undefined, key, targets, place.env);
        const listed = JSON.parse(ok(await fresh.cli('backup', 'list', '--target', 'offsite', '--json')).stdout);
        assert.deepEqual(listed.map((backup: { id: string }) => backup.id), [id]);
        const restored = ok(await fresh.cli('backup', 'restore', id, '--target', 'offsite', '--yes'));
        assert.match(restored.stdout, new RegExp(`restored backup ${id}`));
        const customers = JSON.parse(ok(await fresh.cli('customer', 'list', '--json')).stdout);
        assert.deepEqual(customers.map((c: { name: string }) => c.name), ['Acme Air-Gapped']);
        const verified = ok(await fresh.cli('license', 'verify', licFile));
        assert.match(verified.stdout, /valid/i);
      } finally {
        await place.stop();
        rmSync(work, { recursive: true, force: true });
      }
    });
  }
});
