import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TABLES } from '../../src/lib/storage/migrations.js';
import { ok, runCli } from '../support/cli.js';
import { fillStore } from '../support/fill-store.js';
import { prng } from '../support/prng.js';
import { auditRows, differenceFrom, snapshotTables, type Snapshot } from '../support/tables.js';

/**
 * A backup restores onto whichever engine database.url names: the rows arrive whole (every
 * table compared, value by value, with the source), files signed before still verify, and
 * the store goes on working (the audit ids continue after the largest one).
 */
describe('backup restore across engines', () => {
  let work: string;
  const databases: string[] = [];
  before(async function () {
    const { requirePostgres } = await import('../support/postgres.js');
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-backup-engines-'));
  });
  after(async () => {
    const { dropTestDatabase } = await import('../support/postgres.js');
    for (const url of databases) await dropTestDatabase(url);
    if (work) rmSync(work, { recursive: true, force: true });
  });
  const postgresDatabase = async () => {
    const { createTestDatabase } = await import('../support/postgres.js');
    const url = await createTestDatabase();
    databases.push(url);
    return url;
  };
  const envFor = (name: string, url?: string) => ({
    LICENSE_DATA_DIR: path.join(work, name, 'data'),
    LICENSE_DATABASE_URL: url ?? path.join(work, name, 'data', 'license-server.db'),
    LICENSE_BACKUP_PATH: path.join(work, name, 'backups'),
  });

  /**
   * A store with what the CLI makes (signing key, a customer, a license with entitlements,
   * metadata and a decryption key, a .lic file) and rows made directly; returns its rows
   * as they are just before its backup, the backup file and the .lic file.
   */
  async function sourceStore(name: string, url?: string) {
    const env = envFor(name, url);
    ok(await runCli(['init'], { env }));
    const customer = ok(await runCli(['customer', 'create', '--name', `Kunde ${name} ÄÖÜ`, '--json'], { env })).json();
    ok(await runCli(['entitlement', 'create', '--code', 'reports.export', '--name', 'Reports', '--json'], { env }));
    const license = ok(await runCli(['license', 'create', '--customer', customer.id, '--type', 'hybrid', '--valid-until', '2099-12-31', '--entitlement', 'reports.export:25',
      '--with-decryption-key', '--metadata', 'crm=ACME-1', '--metadata', 'note=tab\there', '--json'], { env })).json();
    const lic = path.join(work, `${name}.lic`);
    ok(await runCli(['license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'machine-1', '--out', lic], { env }));
    await fillStore(env.LICENSE_DATABASE_URL, prng(name.length), 40, name);
    const rows = await snapshotTables(env.LICENSE_DATABASE_URL);
    const backup = ok(await runCli(['backup', 'create', '--json'], { env })).json();
    return { env, rows, file: path.join(env.LICENSE_BACKUP_PATH, backup.file), lic, license };
  }

  const rowCounts = (rows: Snapshot) => Object.fromEntries(TABLES.map((table) => [table.name, rows[table.name]!.length]));

  /** After a restore, the store takes new rows: its audit ids go on after the restored ones. */
  async function keepsWorking(env: Record<string, string> & { LICENSE_DATABASE_URL: string }): Promise<void> {
    const before = Math.max(...auditRows(await snapshotTables(env.LICENSE_DATABASE_URL)).map((entry) => entry.id));
    ok(await runCli(['customer', 'create', '--name', 'After the move'], { env }));
    const entries = auditRows(await snapshotTables(env.LICENSE_DATABASE_URL));
    assert.equal(entries.at(-1)!.action, 'customer.created');
    assert.equal(entries.at(-1)!.id, before + 1);
  }

  it('restores a SQLite backup into a PostgreSQL database holding other data: every row arrives, the old data is the pre-restore backup', async () => {
    const source = await sourceStore('sqlite-source');
    const target = envFor('pg-target', await postgresDatabase());
    ok(await runCli(['init'], { env: target }));
    ok(await runCli(['customer', 'create', '--name', 'Already on PostgreSQL'], { env: target }));
    const old = await snapshotTables(target.LICENSE_DATABASE_URL);

    // Both stores ran init: each one's backup is another server's for the other (issue 35, item 1).
    const result = ok(await runCli(['backup', 'restore', source.file, '--yes', '--replace-keys'], { env: target }));
    const rows = Object.values(rowCounts(source.rows)).reduce((sum, n) => sum + n, 0);
    assert.match(result.stdout, new RegExp(`^moved from SQLite to PostgreSQL: ${TABLES.length} tables, ${rows} rows; database\\.url is unchanged$`, 'm'));
    const restored = await snapshotTables(target.LICENSE_DATABASE_URL);
    assert.equal(differenceFrom(restored, source.rows), undefined);
    const [entry] = auditRows(restored).filter((row) => row.action === 'backup.restored');
    assert.ok(entry, 'the restore is audited');
    assert.deepEqual(JSON.parse(new Map(JSON.parse(entry.row) as Array<[string, string]>).get('details')!).moved, { from: 'sqlite', to: 'postgres', rows: rowCounts(source.rows) });

    // The file signed on SQLite verifies against the signing key that moved with the data.
    const verified = ok(await runCli(['license', 'verify', source.lic, '--hardware-id', 'machine-1', '--json'], { env: target })).json();
    assert.equal(verified.valid, true);
    assert.equal(verified.license.license_id, source.license.id);
    assert.equal(verified.decryption_key_unsealed, true);
    await keepsWorking(target);

    // The replaced PostgreSQL data is the pre-restore backup: restoring it brings it back whole.
    const [pre] = ok(await runCli(['backup', 'list', '--json'], { env: target })).json().filter((b: { trigger: string }) => b.trigger === 'pre-restore');
    assert.equal(pre.engine, 'postgres');
    ok(await runCli(['backup', 'restore', pre.backup_id, '--yes', '--replace-keys'], { env: target }));
    assert.equal(differenceFrom(await snapshotTables(target.LICENSE_DATABASE_URL), old), undefined);
  });

  it('restores a PostgreSQL backup onto a new SQLite host: every row arrives, in a new database file', async () => {
    const source = await sourceStore('pg-source', await postgresDatabase());
    const target = envFor('sqlite-target');
    assert.ok(!existsSync(target.LICENSE_DATABASE_URL));

    const report = ok(await runCli(['backup', 'restore', source.file, '--yes', '--json'], { env: target })).json();
    assert.equal(report.engine, 'postgres');
    assert.deepEqual(report.moved, { from: 'postgres', to: 'sqlite', rows: rowCounts(source.rows) });
    assert.equal(report.pre_restore_backup_id, null, 'nothing to keep on a new host');
    assert.equal(differenceFrom(await snapshotTables(target.LICENSE_DATABASE_URL), source.rows), undefined);
    assert.deepEqual(readdirSync(path.dirname(target.LICENSE_DATABASE_URL)).filter((name) => name.startsWith('.restore-')), [], 'no staging left');

    const verified = ok(await runCli(['license', 'verify', source.lic, '--hardware-id', 'machine-1', '--json'], { env: target })).json();
    assert.equal(verified.valid, true);
    assert.equal(verified.license.license_id, source.license.id);
    assert.equal(verified.decryption_key_unsealed, true);
    await keepsWorking(target);
  });

  it('validates a PostgreSQL backup where database.url is SQLite by converting it into a scratch SQLite file, and creates no database', async () => {
    const source = await sourceStore('pg-validate', await postgresDatabase());
    const host = envFor('sqlite-validator');
    const result = ok(await runCli(['backup', 'validate', source.file], { env: host }));
    const rows = Object.values(rowCounts(source.rows)).reduce((sum, n) => sum + n, 0);
    assert.match(result.stdout, new RegExp(`converted into a scratch SQLite database \\(${rows} rows\\), integrity_check ok, removed again`));
    assert.ok(!existsSync(host.LICENSE_DATABASE_URL), 'no database file at database.url');
    assert.ok(!existsSync(path.dirname(host.LICENSE_DATABASE_URL)), 'nor its directory');
    assert.deepEqual(readdirSync(path.dirname(source.file)).filter((name) => name.startsWith('.validate-')), [], 'the scratch file is removed');
  });
});
