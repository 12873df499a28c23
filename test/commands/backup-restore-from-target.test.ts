import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

const KEY = '6d'.repeat(32);
const OTHER_KEY = '2a'.repeat(32);

function failedWith(result: CliResult, exit: number, code: string): CliResult {
  assert.equal(result.code, exit, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.match(result.stderr, new RegExp(`\\(${code}\\)`), result.stderr);
  return result;
}

/** Every file under `dir`, relative to it (what a restore may have left); [] when it is not there. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => !entry.isDirectory())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort();
}

forEachEngine('backup restore from an off-site target', (fixture) => {
  let work: string;
  let nas: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-restore-target-'));
    nas = path.join(work, 'nas');
    mkdirSync(nas);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  /**
   * A host with its own data directory (not made yet), a backup key or none, and the targets
   * nas and trusted (one directory, which trusts unencrypted backups) or only `only` of them.
   */
  async function host(name: string, key: string | undefined, only?: readonly string[]) {
    const data = path.join(work, name, 'data');
    const targets = [
      { name: 'nas', kind: 'file', path: nas },
      { name: 'trusted', kind: 'file', path: nas, allow_unencrypted: true },
    ].filter((target) => !only || only.includes(target.name));
    const env: Record<string, string> = {
      LICENSE_DATA_DIR: data,
      ...(targets.length > 0 ? { LICENSE_BACKUP_TARGETS: JSON.stringify(targets) } : {}),
      ...(key ? { LICENSE_BACKUP_ENCRYPTION_KEY: key } : {}),
      ...(fixture.engine === 'postgres' ? { LICENSE_DATABASE_URL: await fixture.freshUrl() } : {}),
    };
    return { data, backups: path.join(data, 'backups'), env, cli: (...args: string[]) => runCli(args, { env, cwd: work }) };
  }

  it('refuses another store\'s unencrypted backup from a target without allow_unencrypted, and its keys without --replace-keys (by target, by file)', async function () {
    this.timeout(300_000);
    const attacker = await host('attacker', undefined, []);
    ok(await attacker.cli('init'));
    const planted = ok(await attacker.cli('backup', 'create', '--json')).json();
    for (const name of [planted.file, `${planted.backup_id}.backup.json`]) copyFileSync(path.join(attacker.backups, name), path.join(nas, name));
    const server = await host('server', KEY);
    ok(await server.cli('init'));
    ok(await server.cli('token', 'create', '--name', 'ops'));
    const keys = async () => ok(await server.cli('signing-key', 'list', '--json')).json().map((key: { key_id: string }) => key.key_id);
    const tokens = async () => ok(await server.cli('token', 'list', '--json')).json().map((token: { name: string }) => token.name);
    const ours = await keys();
    // A store in use keeps its lock files (they are never removed); anything else new is left over.
    const lockFile = (name: string) => /\.(daemon|backup)-lock$/.test(name);
    const before = filesUnder(server.data);

    const unencrypted = failedWith(await server.cli('backup', 'restore', planted.backup_id, '--target', 'nas', '--yes'), 6, 'BACKUP_UNENCRYPTED_REFUSED');
    assert.match(unencrypted.stderr, /allow_unencrypted: true/);
    failedWith(await server.cli('backup', 'restore', planted.backup_id, '--target', 'nas', '--dry-run'), 6, 'BACKUP_UNENCRYPTED_REFUSED');

    const dry = ok(await server.cli('backup', 'restore', planted.backup_id, '--target', 'trusted', '--dry-run', '--json')).json();
    assert.equal(dry.signing_keys.another_server, true);
    const unconfirmed = failedWith(await server.cli('backup', 'restore', planted.backup_id, '--target', 'trusted', '--yes'), 2, 'RESTORE_KEYS_NOT_CONFIRMED');
    assert.match(unconfirmed.stderr, /--replace-keys/);
    const file = path.join(work, planted.file);
    copyFileSync(path.join(attacker.backups, planted.file), file);
    failedWith(await server.cli('backup', 'restore', file, '--yes'), 2, 'RESTORE_KEYS_NOT_CONFIRMED');
    assert.deepEqual(await keys(), ours, 'the key set is this server\'s');
    assert.deepEqual(await tokens(), ['ops'], 'the tokens are this server\'s');
    assert.deepEqual(filesUnder(server.data).filter((name) => !before.includes(name) && !lockFile(name)), [], 'the refusals left nothing: no download, no pre-restore backup');

    const replaced = ok(await server.cli('backup', 'restore', planted.backup_id, '--target', 'trusted', '--yes', '--replace-keys', '--json')).json();
    assert.equal(replaced.signing_keys.another_server, true);
    assert.notDeepEqual(await keys(), ours);
    assert.deepEqual(await tokens(), []);
  });

  it('downloads into a staging area: a dry run and a failed restore leave nothing, a restore keeps the backup once it is restored', async function () {
    this.timeout(300_000);
    const lost = await host('lost', KEY, ['nas']);
    ok(await lost.cli('init'));
    ok(await lost.cli('customer', 'create', '--name', 'Kept Ltd'));
    const made = ok(await lost.cli('backup', 'create', '--json')).json();
    assert.ok(existsSync(path.join(nas, `${made.backup_id}.backup.json`)), 'the backup was copied to the target');

    // A new host with the wrong key: everything fails as the restore would, and leaves nothing.
    const wrong = await host('wrong-key', OTHER_KEY);
    failedWith(await wrong.cli('backup', 'restore', made.backup_id, '--target', 'nas', '--dry-run'), 14, 'BACKUP_WRONG_KEY');
    assert.deepEqual(filesUnder(wrong.data), [], 'the dry run left nothing in the data directory');
    failedWith(await wrong.cli('backup', 'restore', made.backup_id, '--target', 'nas', '--yes'), 14, 'BACKUP_WRONG_KEY');
    assert.ok(!existsSync(wrong.data), `the failed restore onto an empty data directory left nothing: ${filesUnder(wrong.data).join(', ')}`);

    // The right key: the dry run still changes nothing, and the restore keeps the download, listed.
    const fresh = await host('fresh', KEY);
    const dry = ok(await fresh.cli('backup', 'restore', made.backup_id, '--target', 'nas', '--dry-run', '--json')).json();
    assert.equal(dry.backup_id, made.backup_id);
    assert.ok(!existsSync(fresh.data), `the dry run changed nothing: ${filesUnder(fresh.data).join(', ')}`);
    ok(await fresh.cli('backup', 'restore', made.backup_id, '--target', 'nas', '--yes'));
    assert.deepEqual(ok(await fresh.cli('customer', 'list', '--json')).json().map((c: { name: string }) => c.name), ['Kept Ltd']);
    const listed = ok(await fresh.cli('backup', 'list', '--json')).json();
    assert.deepEqual(listed.map((backup: { id: string; sha256: string }) => [backup.id, backup.sha256]), [[made.backup_id, made.sha256]]);
    assert.deepEqual(filesUnder(fresh.backups).filter((name) => name.startsWith('.')), [], 'no staging area is left');
  });

  it('fails a dry run where the restore fails: the wrong key, no key, a damaged archive', async function () {
    this.timeout(300_000);
    const maker = await host('maker', KEY, []);
    ok(await maker.cli('init'));
    ok(await maker.cli('customer', 'create', '--name', 'Rehearsed Ltd'));
    const made = ok(await maker.cli('backup', 'create', '--json')).json();
    const copyInto = (backups: string) => {
      mkdirSync(backups, { recursive: true });
      for (const name of [made.file, `${made.backup_id}.backup.json`]) copyFileSync(path.join(maker.backups, name), path.join(backups, name));
    };

    const wrong = await host('rehearsal-wrong', OTHER_KEY);
    ok(await wrong.cli('init'));
    copyInto(wrong.backups);
    failedWith(await wrong.cli('backup', 'validate', made.backup_id), 14, 'BACKUP_WRONG_KEY');
    failedWith(await wrong.cli('backup', 'restore', made.backup_id, '--dry-run'), 14, 'BACKUP_WRONG_KEY');
    failedWith(await wrong.cli('backup', 'restore', made.backup_id, '--yes'), 14, 'BACKUP_WRONG_KEY');

    const keyless = await host('rehearsal-keyless', undefined);
    ok(await keyless.cli('init'));
    copyInto(keyless.backups);
    failedWith(await keyless.cli('backup', 'restore', made.backup_id, '--dry-run'), 14, 'BACKUP_KEY_REQUIRED');
    failedWith(await keyless.cli('backup', 'restore', made.backup_id, '--yes'), 14, 'BACKUP_KEY_REQUIRED');

    const damaged = await host('rehearsal-damaged', KEY);
    ok(await damaged.cli('init'));
    copyInto(damaged.backups);
    // One byte in the middle of the archive: its size stays, its content does not.
    const archive = path.join(damaged.backups, made.file);
    const middle = Math.floor(readFileSync(archive).length / 2);
    const fd = openSync(archive, 'r+');
    writeSync(fd, Buffer.from([readFileSync(archive)[middle]! ^ 0xff]), 0, 1, middle);
    closeSync(fd);
    failedWith(await damaged.cli('backup', 'restore', made.backup_id, '--dry-run'), 13, 'BACKUP_CORRUPT');
    failedWith(await damaged.cli('backup', 'restore', made.backup_id, '--yes'), 13, 'BACKUP_CORRUPT');
  });
});
