import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { TABLES } from '../../src/lib/storage/migrations.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { asUser, CLI, ok, runCli, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { usePostgresDatabase } from '../support/postgres.js';
import { startServe } from '../support/serve.js';

const HINT = 'Try: Point at the right store with --data-dir or LICENSE_DATA_DIR, --database-url or LICENSE_DATABASE_URL, or --config; or create a new one with `license-server init`.';

function notFound(result: CliResult, message: string): void {
  assert.equal(result.code, 7, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.equal(result.stdout, '');
  assert.equal(result.stderr, `Error: ${message} (DATABASE_NOT_FOUND)\n${HINT}\n`);
}

/** Rows per table, or undefined for a table that is not there. */
async function rowCounts(url: string): Promise<Record<string, number | undefined>> {
  const db = await openDatabase(url, { migrate: false });
  try {
    const counts: Record<string, number | undefined> = {};
    for (const table of TABLES) {
      const rows = await db.query<{ n: number }>(`SELECT count(*) AS n FROM ${table.name}`).catch(() => undefined);
      counts[table.name] = rows ? Number(rows[0]!.n) : undefined;
    }
    return counts;
  } finally {
    await db.close();
  }
}

describe('commands without a store (SQLite)', () => {
  let cwd: string;
  beforeEach(() => (cwd = mkdtempSync(path.join(tmpdir(), 'license-no-store-'))));
  afterEach(() => rmSync(cwd, { recursive: true, force: true }));

  it('customer list and signing-key show refuse with DATABASE_NOT_FOUND, name the path and its source, and create nothing', async () => {
    const expected = `no license-server database exists at ${cwd}/data/license-server.db (the default ./data/license-server.db, relative to the working directory ${cwd})`;
    notFound(await runCli(['customer', 'list'], { cwd }), expected);
    notFound(await runCli(['signing-key', 'show'], { cwd }), expected);
    const json = await runCli(['signing-key', 'show', '--json'], { cwd });
    assert.equal(json.code, 7);
    assert.deepEqual(json.json(), { error: { code: 'DATABASE_NOT_FOUND', message: expected } });
    assert.deepEqual(readdirSync(cwd), [], 'no ./data directory, no database, no key');
  });

  it('says where the path came from: a variable, a flag, the configuration file', async () => {
    const elsewhere = path.join(cwd, 'elsewhere');
    notFound(
      await runCli(['customer', 'list'], { cwd, env: { LICENSE_DATA_DIR: elsewhere } }),
      `no license-server database exists at ${elsewhere}/license-server.db (<data_dir>/license-server.db, data_dir from env LICENSE_DATA_DIR)`,
    );
    notFound(
      await runCli(['customer', 'list', '--data-dir', 'elsewhere'], { cwd }),
      `no license-server database exists at ${elsewhere}/license-server.db (<data_dir>/license-server.db, data_dir from flag --data-dir)`,
    );
    notFound(
      await runCli(['token', 'list'], { cwd, env: { LICENSE_DATABASE_URL: path.join(elsewhere, 'x.db') } }),
      `no license-server database exists at ${elsewhere}/x.db (database.url from env LICENSE_DATABASE_URL)`,
    );
    const config = path.join(cwd, 'config.yaml');
    writeFileSync(config, 'data_dir: /srv/licenses\n');
    notFound(
      await runCli(['backup', 'create'], { cwd, env: { LICENSE_CONFIG: config } }),
      `no license-server database exists at /srv/licenses/license-server.db (<data_dir>/license-server.db, data_dir from file ${config})`,
    );
    assert.deepEqual(readdirSync(cwd), ['config.yaml']);
  });

  it('refuses a SQLite file that is not a license-server database, and leaves it without our tables', async () => {
    const foreign = path.join(cwd, 'app.db');
    const db = await openDatabase(foreign, { migrate: false });
    await db.execute('CREATE TABLE notes (text TEXT)');
    await db.close();
    notFound(
      await runCli(['customer', 'list', '--database-url', foreign], { cwd }),
      `${foreign} is not a license-server database (it has no license-server schema) (database.url from flag --database-url)`,
    );
    assert.deepEqual(await rowCounts(foreign), Object.fromEntries(TABLES.map((table) => [table.name, undefined])));
  });

  it('keeps working where no store is needed: config show, backup list, backup decrypt', async () => {
    ok(await runCli(['config', 'show'], { cwd }));
    assert.equal(ok(await runCli(['backup', 'list'], { cwd })).stdout, '(no backups)\n');
    const decrypt = await runCli(['backup', 'decrypt', 'missing.enc', '--out', 'plain.tar.gz'], { cwd, env: { LICENSE_BACKUP_ENCRYPTION_KEY: 'ab'.repeat(32) } });
    assert.match(decrypt.stderr, /\(BACKUP_NOT_FOUND\)/);
    assert.deepEqual(readdirSync(cwd), []);
  });
});

describe('commands without a store (PostgreSQL)', () => {
  const database = usePostgresDatabase();

  it('refuses a database without the license-server schema with DATABASE_NOT_FOUND, and creates no schema in it', async () => {
    const url = database();
    const env = { LICENSE_DATABASE_URL: url };
    const expected = `the PostgreSQL database ${url} has no license-server schema yet (database.url from env LICENSE_DATABASE_URL)`;
    notFound(await runCli(['customer', 'list'], { env }), expected);
    notFound(await runCli(['signing-key', 'show'], { env }), expected);
    assert.deepEqual(await rowCounts(url), Object.fromEntries(TABLES.map((table) => [table.name, undefined])));
  });
});

forEachEngine('license-server init', (fixture) => {
  it('creates a store, then reports it and changes nothing when run again', async () => {
    const url = await fixture.freshUrl();
    const cwd = mkdtempSync(path.join(tmpdir(), 'license-init-'));
    const init = () => runCli(['init', '--json'], { cwd, env: { LICENSE_DATABASE_URL: url } });
    try {
      const first = ok(await init()).json();
      assert.deepEqual(first.created, fixture.engine === 'sqlite' ? ['data_dir', 'database', 'schema', 'signing_key'] : ['schema', 'signing_key']);
      assert.equal(first.engine, fixture.engine);
      assert.match(first.signing_key_fingerprint, /^[0-9a-f]{64}$/);
      assert.equal(first.admin_tokens, 0, 'init makes no admin token: serve prints the bootstrap token');
      if (fixture.engine === 'sqlite') {
        assert.equal(statSync(path.dirname(url)).mode & 0o777, 0o700);
        assert.equal(statSync(url).mode & 0o777, 0o600);
      }
      const counts = await rowCounts(url);
      assert.equal(counts.signing_keys, 1);
      const file = fixture.engine === 'sqlite' ? statSync(url) : undefined;

      const second = ok(await init()).json();
      assert.deepEqual(second.created, []);
      assert.equal(second.migrated, null);
      assert.equal(second.signing_key_fingerprint, first.signing_key_fingerprint);
      assert.equal(second.schema_version, first.schema_version);
      assert.deepEqual(await rowCounts(url), counts, 'not a row added, not even to the audit log');
      if (file) {
        const again = statSync(url);
        assert.deepEqual([again.size, again.mtimeMs], [file.size, file.mtimeMs], 'the database file is untouched');
      }
      const human = ok(await runCli(['init'], { cwd, env: { LICENSE_DATABASE_URL: url } })).stdout;
      assert.match(human, /^the store exists; nothing changed: /);
      assert.match(human, new RegExp(`^signing key fingerprint: +${first.signing_key_fingerprint}$`, 'm'));
      assert.deepEqual(readdirSync(cwd), [], 'nothing in the working directory');
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});

describe('init, then serve', () => {
  it('serve uses the key init made and still prints the bootstrap admin token once', async () => {
    const work = mkdtempSync(path.join(tmpdir(), 'license-init-serve-'));
    const env = { LICENSE_DATA_DIR: path.join(work, 'data') };
    try {
      const report = ok(await runCli(['init', '--json'], { cwd: work, env })).json();
      const serve = await startServe(env);
      await serve.stop();
      assert.equal(serve.fingerprint, report.signing_key_fingerprint);
      assert.match(serve.token ?? '', /^lsat_/);
      const again = await startServe(env);
      await again.stop();
      assert.equal(again.token, undefined, 'only on the first start');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

describe('a cron-style run', () => {
  it('backs up from / with only LICENSE_DATA_DIR set and no terminal: exit 0, one summary line', async () => {
    const work = mkdtempSync(path.join(tmpdir(), 'license-cron-'));
    const dataDir = path.join(work, 'var-lib-license-server');
    mkdirSync(dataDir, { mode: 0o700 });
    try {
      ok(await runCli(['init'], { cwd: work, env: { LICENSE_DATA_DIR: dataDir } }));
      // Cron's working directory is $HOME (here: /), its stdin is not a terminal.
      const run = ok(await runCli(['backup', 'create'], { cwd: '/', env: { LICENSE_DATA_DIR: dataDir, LICENSE_BACKUP_ENCRYPTION_KEY: 'cd'.repeat(32) } }));
      assert.match(run.stdout, /^created backup \S+: .*, encrypted, verified \(.*\)\n$/);
      assert.equal(run.stderr, '');
      assert.equal(readdirSync(path.join(dataDir, 'backups')).filter((name) => name.endsWith('.enc')).length, 1);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

describe('a store of another user (SQLite)', () => {
  let work: string;
  let dataDir: string;
  let database: string;
  const owner = userInfo().username;
  const asNobody = (args: string[]) => runCli(args, { cwd: work, prefix: asUser('nobody', { LICENSE_DATA_DIR: dataDir, LICENSE_PORT: '0' }) });
  const denied = (result: CliResult, message: string, accessTo: string) => {
    assert.equal(result.code, 7, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
    assert.equal(result.stdout, '');
    assert.equal(result.stderr, `Error: ${message} (DATABASE_PERMISSION_DENIED)\nTry: Run the command as the user that owns the store (${owner}: \`sudo -u ${owner} ...\`), or give nobody access to ${accessTo}.\n`);
  };

  before(async function () {
    if (!asUser('nobody', {})) {
      console.warn('    (skipping: running as another user needs root, or sudo under CI=true)');
      this.skip();
    }
    // The other user runs this checkout's CLI: a checkout under a private directory (mktemp -d
    // makes them 0700) would fail every case below with MODULE_NOT_FOUND instead.
    const [command, ...prefix] = asUser('nobody', {})!;
    const probe = spawnSync(command!, [...prefix, 'test', '-r', CLI]);
    assert.equal(probe.status, 0, `user nobody cannot read ${CLI}: run the suite from a checkout that other users may read (chmod o+rx on each directory of its path)`);
    work = mkdtempSync(path.join(tmpdir(), 'license-other-user-'));
    // Only the data directory (0700, as init makes it) and the database (0600) keep nobody out.
    chmodSync(work, 0o755);
    dataDir = path.join(work, 'data');
    database = path.join(dataDir, 'license-server.db');
    ok(await runCli(['init'], { cwd: work, env: { LICENSE_DATA_DIR: dataDir } }));
  });
  after(() => work && rmSync(work, { recursive: true, force: true }));

  it('says permission denied, naming the path, its owner and the user, not a missing store, and creates nothing', async () => {
    assert.equal(statSync(dataDir).mode & 0o777, 0o700);
    const before = readdirSync(dataDir).sort();
    const hidden = `permission denied: user nobody cannot search the directory ${dataDir} (owned by ${owner}, mode 0700), so cannot open the SQLite database ${database}`;
    denied(await asNobody(['license', 'list']), hidden, dataDir);
    assert.deepEqual((await asNobody(['license', 'list', '--json'])).json(), { error: { code: 'DATABASE_PERMISSION_DENIED', message: hidden } });
    denied(await asNobody(['serve']), `permission denied: user nobody cannot search the directory ${dataDir} (owned by ${owner}, mode 0700), so cannot open the lock file ${database}.daemon-lock`, dataDir);

    chmodSync(dataDir, 0o755);
    try {
      denied(await asNobody(['customer', 'list']), `permission denied: user nobody cannot read and write the SQLite database ${database} (owned by ${owner}, mode 0600)`, database);
      denied(await asNobody(['serve']), `permission denied: user nobody cannot create files in the directory ${dataDir} (owned by ${owner}, mode 0755), so cannot open the lock file ${database}.daemon-lock`, dataDir);
    } finally {
      chmodSync(dataDir, 0o700);
    }
    assert.deepEqual(readdirSync(dataDir).sort(), before);
    ok(await runCli(['license', 'list'], { cwd: work, env: { LICENSE_DATA_DIR: dataDir } }));
  });
});
