import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { listBackups } from '../../src/lib/backup/repository.js';
import { loadSqliteDriver } from '../../src/lib/storage/sqlite-driver.js';
import { ok, runCli } from '../support/cli.js';
import { ADMIN_URL, createTestDatabase, dropTestDatabase, onDatabase, requirePostgres } from '../support/postgres.js';
import { differenceFrom, snapshotTables, type Snapshot } from '../support/tables.js';

type Env = Record<string, string> & { LICENSE_DATABASE_URL: string; LICENSE_BACKUP_PATH: string };


/**
 * What a restore onto the other engine refuses, and that a refusal changes nothing: values
 * PostgreSQL cannot store (which an older release may have left in a SQLite database), a
 * PostgreSQL database that is not license-server's alone, and one that does not exist.
 */
describe('cross-engine restore: bad input', function () {
  this.timeout(60_000);
  let work: string;
  let source: Env;
  let target: Env;
  let targetUrl: string;
  let ids: { customer: string; license: string; audit: number };
  let untouched: Snapshot;

  before(async function () {
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-cross-bad-'));
    source = {
      LICENSE_DATA_DIR: path.join(work, 'source', 'data'),
      LICENSE_DATABASE_URL: path.join(work, 'source', 'data', 'license-server.db'),
      LICENSE_BACKUP_PATH: path.join(work, 'source', 'backups'),
    };
    ok(await runCli(['init'], { env: source }));
    const customer = ok(await runCli(['customer', 'create', '--name', 'Plain Name', '--json'], { env: source })).json();
    const license = ok(await runCli(['license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--metadata', 'crm=1', '--json'], { env: source })).json();
    const sqlite = new (loadSqliteDriver())(source.LICENSE_DATABASE_URL);
    const audit = (sqlite.prepare("SELECT max(id) AS id FROM audit_log WHERE action = 'license.created'").get() as { id: number }).id;
    sqlite.close();
    ids = { customer: customer.id, license: license.id, audit };

    targetUrl = await createTestDatabase();
    target = { LICENSE_DATA_DIR: path.join(work, 'target', 'data'), LICENSE_DATABASE_URL: targetUrl, LICENSE_BACKUP_PATH: path.join(work, 'target', 'backups') };
    ok(await runCli(['init'], { env: target }));
    ok(await runCli(['customer', 'create', '--name', 'Already on PostgreSQL'], { env: target }));
    untouched = await snapshotTables(targetUrl);
  });
  after(async () => {
    if (targetUrl) await dropTestDatabase(targetUrl);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /**
   * Writes `sql` into the SQLite source with the bare driver, as an older release could
   * have, backs it up, and puts the old value back; returns the backup file.
   */
  async function backupWith(sql: string, params: unknown[], undo: string, undoParams: unknown[]): Promise<string> {
    const sqlite = new (loadSqliteDriver())(source.LICENSE_DATABASE_URL);
    try {
      assert.equal(sqlite.prepare(sql).run(...params).changes, 1);
    } finally {
      sqlite.close();
    }
    try {
      return path.join(source.LICENSE_BACKUP_PATH, ok(await runCli(['backup', 'create', '--json'], { env: source })).json().file);
    } finally {
      const again = new (loadSqliteDriver())(source.LICENSE_DATABASE_URL);
      again.prepare(undo).run(...undoParams);
      again.close();
    }
  }

  async function refusedUnchanged(file: string, expected: RegExp, secret: string): Promise<void> {
    const result = await runCli(['backup', 'restore', file, '--yes'], { env: target });
    assert.equal(result.code, 13, result.stderr);
    assert.match(result.stderr, /^Error: the backup cannot be moved to PostgreSQL: .* \(BACKUP_NOT_PORTABLE\)$/m);
    assert.match(result.stderr, expected);
    assert.ok(!result.stderr.includes(secret) && !result.stdout.includes(secret), `the value is not shown: ${result.stderr}`);
    const json = await runCli(['backup', 'restore', file, '--yes', '--json'], { env: target });
    assert.equal(json.code, 13);
    assert.equal(json.json().error.code, 'BACKUP_NOT_PORTABLE');
    assert.ok(!json.stdout.includes(secret));
    assert.deepEqual(await snapshotTables(targetUrl), untouched, 'the PostgreSQL database is untouched, to the last audit entry');
    assert.deepEqual(await listBackups(target.LICENSE_BACKUP_PATH), [], 'no pre-restore backup was taken');
  }

  it('refuses a customer name with a NUL character (exit 13, BACKUP_NOT_PORTABLE naming table, row and column, not the value)', async () => {
    const file = await backupWith('UPDATE customers SET name = ? WHERE id = ?', ['Geheim\0Kunde', ids.customer], 'UPDATE customers SET name = ? WHERE id = ?', ['Plain Name', ids.customer]);
    await refusedUnchanged(file, new RegExp(`table customers, row id ${ids.customer}, column name holds a NUL character`), 'Geheim');
  });

  it("refuses a license's metadata that is not UTF-8", async () => {
    // "caf\xe9": Latin-1, stored as TEXT the way a client writing raw bytes could have.
    const bytes = Buffer.concat([Buffer.from('{"token":"s3cr'), Buffer.from([0xe9]), Buffer.from('t-caf"}')]);
    const file = await backupWith('UPDATE licenses SET metadata = CAST(? AS TEXT) WHERE id = ?', [bytes, ids.license], 'UPDATE licenses SET metadata = ? WHERE id = ?', ['{"crm":"1"}', ids.license]);
    await refusedUnchanged(file, new RegExp(`table licenses, row id ${ids.license}, column metadata is not valid UTF-8`), 's3cr');
  });

  it('refuses an audit entry that is not UTF-8', async () => {
    const bytes = Buffer.concat([Buffer.from('{"password":"hunter'), Buffer.from([0xff, 0xfe]), Buffer.from('2"}')]);
    const file = await backupWith('UPDATE audit_log SET details = CAST(? AS TEXT) WHERE id = ?', [bytes, ids.audit], 'UPDATE audit_log SET details = ? WHERE id = ?', ['{}', ids.audit]);
    await refusedUnchanged(file, new RegExp(`table audit_log, row id ${ids.audit}, column details is not valid UTF-8`), 'hunter');
  });

  it('refuses a PostgreSQL backup with a timestamp SQLite cannot hold, leaving the SQLite target as it was', async () => {
    const pgSource = { LICENSE_DATA_DIR: path.join(work, 'pg-source', 'data'), LICENSE_DATABASE_URL: await createTestDatabase(), LICENSE_BACKUP_PATH: path.join(work, 'pg-source', 'backups') };
    try {
      ok(await runCli(['init'], { env: pgSource }));
      const customer = ok(await runCli(['customer', 'create', '--name', 'On PostgreSQL', '--json'], { env: pgSource })).json();
      const license = ok(await runCli(['license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--json'], { env: pgSource })).json();
      // PostgreSQL takes years past 9999 (and 'infinity'); license-server's text timestamps do not.
      await onDatabase(pgSource.LICENSE_DATABASE_URL, (client) => client.query("UPDATE licenses SET valid_until = '12024-01-01T00:00:00Z' WHERE id = $1", [license.id]));
      const file = path.join(pgSource.LICENSE_BACKUP_PATH, ok(await runCli(['backup', 'create', '--json'], { env: pgSource })).json().file);

      const existing: Env = { ...source, LICENSE_BACKUP_PATH: path.join(work, 'sqlite-target-backups') };
      const bytes = readFileSync(existing.LICENSE_DATABASE_URL);
      const result = await runCli(['backup', 'restore', file, '--yes'], { env: existing });
      assert.equal(result.code, 13, result.stderr);
      assert.match(result.stderr, new RegExp(`^Error: the backup cannot be moved to SQLite: table licenses, row id ${license.id} \\(line \\d+ of the dump\\), column valid_until is not a timestamp .*\\(BACKUP_NOT_PORTABLE\\)$`, 'm'));
      assert.ok(!result.stderr.includes('12024'), 'the value is not shown');
      assert.deepEqual(readFileSync(existing.LICENSE_DATABASE_URL), bytes, 'the SQLite database is untouched, byte for byte');
      assert.deepEqual(await listBackups(existing.LICENSE_BACKUP_PATH), [], 'no pre-restore backup was taken');
      assert.deepEqual(readdirSync(path.dirname(existing.LICENSE_DATABASE_URL)).filter((name) => name.startsWith('.restore-')), [], 'the staging directory is removed');

      const newHost = path.join(work, 'new-host', 'license-server.db');
      const fresh = await runCli(['backup', 'restore', file, '--yes'], { env: { LICENSE_DATABASE_URL: newHost, LICENSE_BACKUP_PATH: path.join(work, 'new-host', 'backups') } });
      assert.equal(fresh.code, 13, fresh.stderr);
      assert.ok(!existsSync(newHost), 'no database file on a new host');
    } finally {
      await dropTestDatabase(pgSource.LICENSE_DATABASE_URL);
    }
  });

  it('refuses a PostgreSQL database holding a table that is not license-server\'s (exit 5, DATABASE_NOT_EMPTY), and restores beside it with --force', async () => {
    const rows = await snapshotTables(source.LICENSE_DATABASE_URL);
    const file = path.join(source.LICENSE_BACKUP_PATH, ok(await runCli(['backup', 'create', '--json'], { env: source })).json().file);
    await onDatabase(targetUrl, (client) => client.query("CREATE TABLE invoices (id integer PRIMARY KEY, amount numeric NOT NULL); INSERT INTO invoices VALUES (1, 99.50)"));
    const invoices = () => onDatabase(targetUrl, async (client) => (await client.query('SELECT id, amount FROM invoices')).rows);
    try {
      const result = await runCli(['backup', 'restore', file, '--yes'], { env: target });
      assert.equal(result.code, 5, result.stderr);
      assert.match(result.stderr, /^Error: the PostgreSQL database .* holds tables that are not license-server's \(invoices\); nothing was changed \(DATABASE_NOT_EMPTY\)$/m);
      assert.match(result.stderr, /^Try: .*--force/m);
      assert.deepEqual(await snapshotTables(targetUrl), untouched);
      assert.deepEqual(await invoices(), [{ id: 1, amount: '99.50' }]);
      assert.deepEqual(await listBackups(target.LICENSE_BACKUP_PATH), [], 'no pre-restore backup was taken');

      // The target store has keys of its own: the source's backup is another server's for it (issue 35, item 1).
      const forced = ok(await runCli(['backup', 'restore', file, '--yes', '--force', '--replace-keys', '--json'], { env: target })).json();
      assert.equal(forced.moved.from, 'sqlite');
      assert.equal(differenceFrom(await snapshotTables(targetUrl), rows), undefined, 'the backup\'s data arrived');
      assert.deepEqual(await invoices(), [{ id: 1, amount: '99.50' }], 'the other table is left as it was');
    } finally {
      await onDatabase(targetUrl, (client) => client.query('DROP TABLE IF EXISTS invoices'));
    }
  });

  it('refuses, --force or not, a PostgreSQL database where views or foreign keys depend on license-server\'s tables (a restore would drop them)', async () => {
    const file = path.join(source.LICENSE_BACKUP_PATH, (await listBackups(source.LICENSE_BACKUP_PATH))[0]!.file);
    // In a schema of its own the view is no table of license-server's schema: only its dependency shows.
    await onDatabase(targetUrl, (client) => client.query('CREATE SCHEMA reports; CREATE VIEW reports.active_customers AS SELECT id, name FROM customers'));
    try {
      const rows = await snapshotTables(targetUrl);
      const backupsBefore = await listBackups(target.LICENSE_BACKUP_PATH);
      const plain = await runCli(['backup', 'restore', file, '--yes'], { env: target });
      assert.equal(plain.code, 5, plain.stderr);
      assert.match(plain.stderr, /has objects that depend on license-server's tables \(view reports\.active_customers\), which a restore would drop with them; nothing was changed \(DATABASE_NOT_EMPTY\)$/m);

      await onDatabase(targetUrl, (client) => client.query('CREATE TABLE invoices (id integer PRIMARY KEY, customer_id uuid REFERENCES customers (id))'));
      const forced = await runCli(['backup', 'restore', file, '--yes', '--force'], { env: target });
      assert.equal(forced.code, 5, forced.stderr);
      assert.match(forced.stderr, /\(foreign key invoices_customer_id_fkey of public\.invoices, view reports\.active_customers\)/);
      assert.match(forced.stderr, /^Try: .*--force does not cover them/m);

      assert.deepEqual(await snapshotTables(targetUrl), rows, 'nothing was changed');
      assert.deepEqual(await listBackups(target.LICENSE_BACKUP_PATH), backupsBefore, 'no pre-restore backup was taken');
      const still = await onDatabase(targetUrl, async (client) => ({
        view: (await client.query('SELECT count(*)::int AS n FROM reports.active_customers')).rows[0].n,
        keys: (await client.query("SELECT count(*)::int AS n FROM pg_constraint WHERE conname = 'invoices_customer_id_fkey'")).rows[0].n,
      }));
      assert.deepEqual(still, { view: rows.customers!.length, keys: 1 }, 'the view and the foreign key are still there');
    } finally {
      await onDatabase(targetUrl, (client) => client.query('DROP SCHEMA reports CASCADE; DROP TABLE IF EXISTS invoices'));
    }
  });

  it('refuses a PostgreSQL database that does not exist (exit 7, DATABASE_NOT_FOUND) with the createdb command, and creates none', async () => {
    const name = `license_test_missing_${randomBytes(4).toString('hex')}`;
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    const file = path.join(source.LICENSE_BACKUP_PATH, (await listBackups(source.LICENSE_BACKUP_PATH))[0]!.file);
    const exists = () => onDatabase(ADMIN_URL, async (client) => (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rows.length > 0);
    try {
      const result = await runCli(['backup', 'restore', file, '--yes'], { env: { ...target, LICENSE_DATABASE_URL: url.toString() } });
      assert.equal(result.code, 7, result.stderr);
      assert.match(result.stderr, new RegExp(`^Error: the PostgreSQL database "${name}" does not exist on .*; a restore fills an existing database and does not create one \\(DATABASE_NOT_FOUND\\)$`, 'm'));
      const where = [url.hostname && `-h ${url.hostname}`, url.port && `-p ${url.port}`, url.username && `-U ${url.username}`].filter(Boolean).join(' ');
      const tryLine = result.stderr.split('\n').find((line) => line.startsWith('Try: '));
      assert.ok(tryLine?.includes(`\`createdb ${where} ${name}\``), `the hint gives the command: ${result.stderr}`);
      assert.equal(await exists(), false, 'no database was created');
    } finally {
      await onDatabase(ADMIN_URL, (client) => client.query(`DROP DATABASE IF EXISTS ${name}`));
    }
  });
});
