import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, statSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { listBackups } from '../../src/lib/backup/repository.js';
import { deadScratchDatabases } from '../../src/lib/backup/engines/scratch-databases.js';
import { verifyArchive } from '../../src/lib/backup/archive/verify.js';
import { ERROR_TABLE, type ErrorCode } from '../../src/lib/errors.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli, type CliResult } from '../support/cli.js';
import { fillStore } from '../support/fill-store.js';
import { ADMIN_URL, createTestDatabase, dropTestDatabase, onDatabase, requirePostgres } from '../support/postgres.js';
import { prng } from '../support/prng.js';

/**
 * Full disks on every write path of create, validate and restore, on both engines: small
 * tmpfs mounts at several free-space levels (nothing at all; the snapshot or dump but not
 * the archive; the archive but not the read-back staging; the staging but not the
 * pre-restore backup), and a PostgreSQL tablespace on a small tmpfs that a restore's COPY
 * fills (SQLSTATE 53100). Each failure must be the documented code with its exit code and
 * the directory named, no stack trace, no work file or lock left, the data as it was; and
 * the same command must work once there is room. Mounting needs root, as CI has.
 */
const KEY = 'cd'.repeat(32);
const KEY_BYTES = Buffer.from(KEY, 'hex');
// Small stores: a few hundred KiB of database, so that each level costs well under a second.
const CUSTOMERS = 300;
const DEBRIS = /^\.tmp-|\.partial$|^\.restore-|^\.validate-|^\.lock$/;

describe('backups on a full disk', function () {
  this.timeout(120_000);
  let work: string;
  const mounted: string[] = [];
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-diskfull-'));
    // The PostgreSQL server (another OS user) must reach the tablespace below.
    chmodSync(work, 0o755);
  });
  afterEach(() => {
    for (const dir of mounted.splice(0).reverse()) execFileSync('umount', [dir], { stdio: 'pipe' });
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  /** A tmpfs of `kib` KiB on a new directory; under CI a machine that cannot mount fails, elsewhere the test is skipped. */
  function mountTmpfs(context: Mocha.Context, name: string, kib: number, extra = 'mode=0700'): string {
    const dir = path.join(work, name);
    mkdirSync(dir, { recursive: true });
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${kib}k,${extra}`, 'tmpfs', dir], { stdio: 'pipe' });
    } catch (error) {
      if (process.env.CI === 'true') throw new Error(`cannot mount a small file system for this test: ${String(error)}`);
      console.warn('    (skipping: cannot mount a tmpfs here)');
      context.skip();
    }
    mounted.push(dir);
    return dir;
  }
  const resize = (dir: string, kib: number) => execFileSync('mount', ['-o', `remount,size=${kib}k`, dir], { stdio: 'pipe' });
  const usedKib = (dir: string) => {
    const fs = statfsSync(dir);
    return ((fs.blocks - fs.bfree) * fs.bsize) / 1024;
  };
  /** Leaves `dir`'s file system with no free block: only a file that needs none can be made. */
  function fillToTheBrim(dir: string): () => void {
    const filler = path.join(dir, 'filler');
    const fd = openSync(filler, 'w');
    try {
      for (;;) writeSync(fd, Buffer.alloc(4096));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
    } finally {
      closeSync(fd);
    }
    assert.equal(statfsSync(dir).bavail, 0, 'the file system is full');
    return () => rmSync(filler);
  }

  /** The documented code and exit code, the directory named, no stack trace. */
  function failedCleanly(result: CliResult, code: ErrorCode, directory?: string): void {
    const shown = `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`;
    assert.match(result.stderr, new RegExp(`\\(${code}\\)`), shown);
    assert.equal(result.code, ERROR_TABLE[code].exit, shown);
    if (directory) assert.ok(result.stderr.includes(directory), `the message names ${directory}\n${shown}`);
    assert.doesNotMatch(result.stderr, /^\s+at |node:internal|BACKUP_CORRUPT|INTERNAL/m, shown);
  }
  const debris = (...dirs: string[]) => dirs.flatMap((dir) => readdirSync(dir).filter((name) => DEBRIS.test(name)).map((name) => path.join(dir, name)));
  /** Archive size and the size of its database entry, in KiB. */
  async function sizesOf(backupDir: string, id: string): Promise<{ archive: number; database: number }> {
    const [record] = (await listBackups(backupDir)).filter((backup) => backup.backup_id === id);
    const file = path.join(backupDir, record!.file);
    const { manifest } = await verifyArchive(file, { key: KEY_BYTES });
    const database = manifest.entries.find((entry) => entry.name.startsWith('database/'))!.size;
    return { archive: statSync(file).size / 1024, database: database / 1024 };
  }
  async function customerIds(url: string): Promise<string> {
    const db = await openDatabase(url, { create: false });
    try {
      return (await db.query<{ id: string }>('SELECT id FROM customers ORDER BY id')).map((row) => row.id).join(',');
    } finally {
      await db.close();
    }
  }
  const envOf = (url: string, backups: string) => ({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: backups, LICENSE_BACKUP_ENCRYPTION_KEY: KEY });
  const createdId = async (env: Record<string, string>) => ok(await runCli(['backup', 'create', '--json'], { env })).json<{ backup_id: string }>().backup_id;

  /** The store of one engine with a backup of it in a roomy directory: what every level starts from. */
  interface Store {
    readonly url: string;
    readonly home: string;
    readonly backupId: string;
    readonly sizes: { archive: number; database: number };
  }
  async function makeStore(url: string, home: string): Promise<Store> {
    ok(await runCli(['init'], { env: envOf(url, home) }));
    await fillStore(url, prng(16), CUSTOMERS, 'full');
    const backupId = await createdId(envOf(url, home));
    return { url, home, backupId, sizes: await sizesOf(home, backupId) };
  }

  /** create with backup.path on a tmpfs: the lock, the snapshot or dump, then the archive run out of room. */
  async function createRunsOutOfRoom(context: Mocha.Context, store: Store, label: string): Promise<void> {
    const { archive, database } = store.sizes;
    // SQLite's snapshot is the database file; PostgreSQL's dump is spooled compressed, about
    // the size of the archive.
    const spooled = label === 'pg' ? archive : database;
    const levels: Array<[string, (dir: string) => void]> = [
      ['nothing (the lock cannot be written)', (dir) => void fillToTheBrim(dir)],
      ['half of the snapshot', (dir) => resize(dir, Math.ceil(spooled / 2))],
      ['the snapshot but not the archive', (dir) => resize(dir, Math.ceil(spooled + archive / 2))],
    ];
    for (const [i, [level, starve]] of levels.entries()) {
      const dir = mountTmpfs(context, `${label}-create-${i}`, 64 * 1024);
      starve(dir);
      const env = envOf(store.url, dir);
      failedCleanly(await runCli(['backup', 'create'], { env }), 'FILE_WRITE_FAILED', dir);
      assert.deepEqual(debris(dir), [], level);
      assert.deepEqual(await listBackups(dir), [], level);
      execFileSync('umount', [dir]);
      mounted.pop();
    }
    // With room, the same command works: nothing was left to stand in its way.
    const roomy = mountTmpfs(context, `${label}-create-room`, Math.ceil(database + 2 * archive + 256));
    await createdId(envOf(store.url, roomy));
    assert.equal((await listBackups(roomy)).length, 1);
  }

  /**
   * validate, then restore, of a backup on a tmpfs with room for the archive but not for the
   * read-back of its database; then (restore only) for that but not the pre-restore backup.
   */
  async function validateAndRestoreRunOutOfRoom(context: Mocha.Context, store: Store, label: string, postgres: boolean): Promise<void> {
    const { archive, database } = store.sizes;
    const dir = mountTmpfs(context, `${label}-read-back`, 64 * 1024);
    const env = envOf(store.url, dir);
    const id = await createdId(env);
    await fillStore(store.url, prng(17), 1, 'after');
    const before = await customerIds(store.url);
    // Validate extracts the database into the backup directory. A SQLite restore stages it
    // beside the database, where there is room; a PostgreSQL restore loads the dump as it
    // reads it, staging nothing. So in both the restore's pre-restore backup is what fails
    // here (for PostgreSQL, with less room than its compressed dump and archive need).
    resize(dir, Math.ceil(usedKib(dir) + (postgres ? archive / 2 : database / 2)));
    failedCleanly(await runCli(['backup', 'validate', id], { env }), 'FILE_WRITE_FAILED', dir);
    assert.deepEqual(debris(dir), []);
    const restore = await runCli(['backup', 'restore', id, '--yes'], { env });
    failedCleanly(restore, 'FILE_WRITE_FAILED', dir);
    assert.deepEqual(debris(dir, path.dirname(postgres ? dir : store.url)), []);
    assert.equal(await customerIds(store.url), before, 'the database is as it was');
    assert.deepEqual((await listBackups(dir)).map((backup) => backup.backup_id), [id], 'no half-made backup is listed');
    resize(dir, Math.ceil(usedKib(dir) + 3 * database + 2 * archive + 256));
    ok(await runCli(['backup', 'validate', id], { env }));
    ok(await runCli(['backup', 'restore', id, '--yes'], { env }));
    assert.notEqual(await customerIds(store.url), before, 'restored');
    assert.deepEqual(debris(dir), []);
  }

  describe('on SQLite', () => {
    let store: Store;
    before(async () => {
      const home = path.join(work, 'sqlite-home');
      store = await makeStore(path.join(home, 'data', 'license-server.db'), path.join(home, 'backups'));
    });

    it('create fails with FILE_WRITE_FAILED at every level, leaves nothing, and works with room', async function () {
      await createRunsOutOfRoom(this, store, 'sqlite');
    });

    it('validate and restore fail with FILE_WRITE_FAILED when the read-back or the pre-restore backup has no room', async function () {
      await validateAndRestoreRunOutOfRoom(this, store, 'sqlite', false);
    });

    it('a backup directory turned read-only: create, prune, validate and restore are FILE_WRITE_FAILED', async function () {
      const dir = mountTmpfs(this, 'sqlite-read-only', 64 * 1024);
      const env = envOf(store.url, dir);
      const id = await createdId(env);
      execFileSync('mount', ['-o', 'remount,ro', dir], { stdio: 'pipe' });
      for (const args of [['backup', 'create'], ['backup', 'prune'], ['backup', 'validate', id], ['backup', 'restore', id, '--yes']]) {
        const result = await runCli(args, { env });
        failedCleanly(result, 'FILE_WRITE_FAILED', dir);
        assert.match(result.stderr, /read-only file system/, args.join(' '));
      }
      execFileSync('mount', ['-o', 'remount,rw', dir], { stdio: 'pipe' });
      assert.deepEqual(debris(dir), []);
      ok(await runCli(['backup', 'validate', id], { env }));
    });

    it('restore into a database directory without room for the staged database leaves the old database', async function () {
      const dataDir = mountTmpfs(this, 'sqlite-data', 64 * 1024);
      const url = path.join(dataDir, 'license-server.db');
      const env = envOf(url, store.home);
      ok(await runCli(['init'], { env }));
      ok(await runCli(['customer', 'create', '--name', 'only'], { env }));
      const before = await customerIds(url);
      const { database } = store.sizes;
      for (const level of ['nothing', 'half of the staged database'] as const) {
        const refill = level === 'nothing' ? fillToTheBrim(dataDir) : (resize(dataDir, Math.ceil(usedKib(dataDir) + database / 2)), () => undefined);
        failedCleanly(await runCli(['backup', 'restore', store.backupId, '--yes', '--replace-keys'], { env }), 'FILE_WRITE_FAILED', dataDir);
        assert.deepEqual(debris(dataDir, store.home), [], level);
        refill();
        assert.equal(await customerIds(url), before, `${level}: the database is as it was`);
      }
      resize(dataDir, Math.ceil(usedKib(dataDir) + 3 * database + 256));
      ok(await runCli(['backup', 'restore', store.backupId, '--yes', '--replace-keys'], { env }));
      assert.equal((await customerIds(url)).split(',').length, CUSTOMERS);
    });
  });

  describe('across engines', () => {
    let sqlite: Store;
    let postgres: Store;
    before(async function () {
      await requirePostgres(this);
      sqlite = await makeStore(path.join(work, 'cross-sqlite', 'data', 'license-server.db'), path.join(work, 'cross-sqlite', 'backups'));
      const url = await createTestDatabase();
      postgres = await makeStore(url, path.join(work, 'cross-pg'));
    });
    after(async () => {
      if (postgres) await dropTestDatabase(postgres.url);
    });

    /** Copies the backup's archive onto `dir` and returns its path, to restore or validate by path. */
    async function archiveOn(store: Store, dir: string): Promise<string> {
      const [record] = await listBackups(store.home);
      const copy = path.join(dir, record!.file);
      execFileSync('cp', [path.join(store.home, record!.file), copy]);
      return copy;
    }

    it('a conversion that runs out of room (SQLite backup onto PostgreSQL, PostgreSQL backup onto SQLite) is FILE_WRITE_FAILED and changes nothing', async function () {
      // Onto PostgreSQL: the SQLite file is staged in the backup directory, then its dump is written beside it.
      const pgBackups = mountTmpfs(this, 'cross-pg-backups', 64 * 1024);
      const sqliteArchive = await archiveOn(sqlite, pgBackups);
      const pgBefore = await customerIds(postgres.url);
      resize(pgBackups, Math.ceil(usedKib(pgBackups) + sqlite.sizes.database + 64));
      const onto = await runCli(['backup', 'restore', sqliteArchive, '--yes', '--replace-keys'], { env: envOf(postgres.url, pgBackups) });
      failedCleanly(onto, 'FILE_WRITE_FAILED', pgBackups);
      assert.deepEqual(debris(pgBackups), []);
      assert.equal(await customerIds(postgres.url), pgBefore, 'the PostgreSQL database is as it was');

      // Onto SQLite: the dump is staged beside the database, then converted into a SQLite file there;
      // validate converts into a scratch file beside the archive.
      const dataDir = mountTmpfs(this, 'cross-sqlite-data', 64 * 1024);
      const url = path.join(dataDir, 'license-server.db');
      const env = envOf(url, sqlite.home);
      ok(await runCli(['init'], { env }));
      ok(await runCli(['customer', 'create', '--name', 'only'], { env }));
      const before = await customerIds(url);
      const pgArchive = await archiveOn(postgres, dataDir);
      resize(dataDir, Math.ceil(usedKib(dataDir) + postgres.sizes.database + 64));
      failedCleanly(await runCli(['backup', 'validate', pgArchive], { env }), 'FILE_WRITE_FAILED', dataDir);
      failedCleanly(await runCli(['backup', 'restore', pgArchive, '--yes', '--replace-keys'], { env }), 'FILE_WRITE_FAILED', dataDir);
      assert.deepEqual(debris(dataDir), []);
      assert.equal(await customerIds(url), before, 'the SQLite database is as it was');

      resize(pgBackups, 64 * 1024);
      ok(await runCli(['backup', 'restore', sqliteArchive, '--yes', '--replace-keys'], { env: envOf(postgres.url, pgBackups) }));
      assert.equal((await customerIds(postgres.url)).split(',').length, CUSTOMERS);
    });
  });

  describe('on PostgreSQL', () => {
    let store: Store;
    const databases: string[] = [];
    before(async function () {
      await requirePostgres(this);
      const url = await createTestDatabase();
      databases.push(url);
      store = await makeStore(url, path.join(work, 'pg-home'));
    });
    after(async () => {
      for (const url of databases) await dropTestDatabase(url);
    });

    it('create fails with FILE_WRITE_FAILED at every level (the dump, then the archive), leaves nothing, and works with room', async function () {
      await createRunsOutOfRoom(this, store, 'pg');
    });

    it('validate and restore fail with FILE_WRITE_FAILED when the extracted dump or the pre-restore backup has no room', async function () {
      await validateAndRestoreRunOutOfRoom(this, store, 'pg', true);
    });

    it('a restore whose COPY fills the server\'s disk (53100) is DATABASE_DISK_FULL, not BACKUP_CORRUPT, and changes nothing', async function () {
      const owner = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
      const group = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
      const space = mountTmpfs(this, 'pg-tablespace', 16 * 1024, `mode=0700,uid=${owner},gid=${group}`);
      const tablespace = `license_test_full_${process.pid}`;
      await onDatabase(ADMIN_URL, (client) => client.query(`CREATE TABLESPACE ${tablespace} LOCATION '${space}'`));
      const url = await createTestDatabase();
      try {
        // Our tables (not the catalogs) go to the small tablespace: the restore's COPY fills it.
        const name = new URL(url).pathname.slice(1);
        await onDatabase(ADMIN_URL, (client) => client.query(`ALTER DATABASE ${name} SET default_tablespace = ${tablespace}`));
        const env = envOf(url, store.home);
        ok(await runCli(['init'], { env }));
        ok(await runCli(['customer', 'create', '--name', 'only'], { env }));
        const before = await customerIds(url);
        // Room for what is there, not for the backup's rows beside it (the old tables go only at the commit).
        resize(space, Math.ceil(usedKib(space) + store.sizes.database / 4));
        const result = await runCli(['backup', 'restore', store.backupId, '--yes', '--replace-keys'], { env });
        failedCleanly(result, 'DATABASE_DISK_FULL');
        assert.match(result.stderr, /53100/);
        assert.equal(await customerIds(url), before, 'the database is as it was');
        assert.deepEqual(debris(store.home), []);
        // validate's scratch database gets its tables there too, through the connection's options.
        const scratchUrl = new URL(url);
        scratchUrl.searchParams.set('options', `-c default_tablespace=${tablespace}`);
        // Another test run may share the server: only a scratch database this validate left counts.
        const leftBefore = new Set(await deadScratchDatabases(ADMIN_URL));
        const validation = await runCli(['backup', 'validate', store.backupId], { env: { ...env, LICENSE_DATABASE_URL: scratchUrl.toString() } });
        failedCleanly(validation, 'DATABASE_DISK_FULL');
        assert.deepEqual((await deadScratchDatabases(ADMIN_URL)).filter((name) => !leftBefore.has(name)), [], 'the scratch database is dropped');
        resize(space, 16 * 1024);
        ok(await runCli(['backup', 'restore', store.backupId, '--yes', '--replace-keys'], { env }));
        assert.equal((await customerIds(url)).split(',').length, CUSTOMERS);
      } finally {
        await dropTestDatabase(url);
        await onDatabase(ADMIN_URL, (client) => client.query(`DROP TABLESPACE IF EXISTS ${tablespace}`));
      }
    });
  });
});
