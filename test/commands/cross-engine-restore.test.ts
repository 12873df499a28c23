import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { COLUMN_KINDS, type ColumnKind } from '../../src/lib/storage/column-kinds.js';
import { SCHEMA_VERSION, TABLES } from '../../src/lib/storage/migrations.js';
import { loadSqliteDriver } from '../../src/lib/storage/sqlite-driver.js';
import { ok, runCli } from '../support/cli.js';

type Table = string[];

/**
 * Every table of a SQLite file, each row as the meaning of its values (ids lowercase,
 * timestamps as UTC to the millisecond, booleans, bytes as hex, integers exactly, JSON with
 * its keys sorted), rows sorted: two databases compare equal when they hold the same data.
 */
function readSqlite(file: string): Record<string, Table> {
  const db = new (loadSqliteDriver())(file, { readonly: true });
  try {
    const tables: Record<string, Table> = {};
    for (const { name } of TABLES) {
      const rows = db.prepare(`SELECT * FROM ${name}`).safeIntegers(true).all() as Array<Record<string, unknown>>;
      tables[name] = rows.map((row) => normalRow(name, row, (kind, value) => {
        if (kind === 'boolean') return String(value === 1n);
        if (kind === 'bytes') return (value as Buffer).toString('hex');
        if (kind === 'integer') return String(value);
        return value as string;
      })).sort();
    }
    return tables;
  } finally {
    db.close();
  }
}

/** The same from PostgreSQL, with PostgreSQL's own functions doing the formatting. */
async function readPostgres(url: string): Promise<Record<string, Table>> {
  const client = new pg.Client({ connectionString: url, types: { getTypeParser: () => (value: string) => value } });
  await client.connect();
  try {
    const tables: Record<string, Table> = {};
    for (const { name } of TABLES) {
      const columns = Object.entries(COLUMN_KINDS[name]!).map(([column, kind]) => {
        const expression = {
          timestamp: `to_char("${column}" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
          bytes: `encode("${column}", 'hex')`,
          boolean: `"${column}"::text`,
          integer: `"${column}"::text`,
          uuid: `"${column}"::text`,
          json: `"${column}"::text`,
          text: `"${column}"`,
        }[kind];
        return `${expression} AS "${column}"`;
      });
      const { rows } = await client.query(`SELECT ${columns.join(', ')} FROM ${name}`);
      tables[name] = rows.map((row: Record<string, unknown>) => normalRow(name, row, (kind, value) => (kind === 'boolean' ? String(value === 'true') : (value as string)))).sort();
    }
    return tables;
  } finally {
    await client.end();
  }
}

function normalRow(table: string, row: Record<string, unknown>, read: (kind: ColumnKind, value: unknown) => string): string {
  const entries = Object.entries(COLUMN_KINDS[table]!).map(([column, kind]) => {
    const value = row[column];
    if (value === null || value === undefined) return [column, null];
    const text = read(kind, value);
    if (kind === 'uuid') return [column, text.toLowerCase()];
    if (kind === 'json') return [column, sortedJson(JSON.parse(text))];
    return [column, text];
  });
  return JSON.stringify(entries);
}

function sortedJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedJson);
  if (value && typeof value === 'object') return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortedJson((value as Record<string, unknown>)[key])]));
  return value;
}

/** The rows of `later` that `earlier` did not have: what the restore itself added (its audit entry). */
function withoutAuditAfter(tables: Record<string, Table>, lastId: bigint): Record<string, Table> {
  return { ...tables, audit_log: tables.audit_log!.filter((row) => BigInt((JSON.parse(row) as Array<[string, string]>)[0]![1]) <= lastId) };
}

// Strings that break naive escaping in SQL, COPY, JSON and line-based readers.
const HOSTILE = [
  'tab\there',
  'new\nline and \r\n',
  'back\\slash \\N \\. \\\\',
  '\\.',
  '\\N',
  "quote ' \" ` ;--",
  'émoji 😀 combining e\u0301 rtl \u202e עברית zero\u200bwidth line\u2028sep',
  '\u0001\u001f\u007f control characters',
  'x'.repeat(100_000),
  '',
];

describe('backup restore across engines: every table, every column kind, hostile strings', function () {
  this.timeout(120_000);
  let work: string;
  let postgresUrl: string | undefined;
  before(async function () {
    const { requirePostgres, createTestDatabase } = await import('../support/postgres.js');
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-cross-engine-'));
    postgresUrl = await createTestDatabase();
  });
  after(async () => {
    const { dropTestDatabase } = await import('../support/postgres.js');
    if (postgresUrl) await dropTestDatabase(postgresUrl);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('moves SQLite to PostgreSQL and back with every row equal in meaning, and old .lic files verify after each move', async () => {
    const source = path.join(work, 'sqlite', 'license-server.db');
    const env = { LICENSE_DATABASE_URL: source, LICENSE_BACKUP_PATH: path.join(work, 'sqlite-backups') };
    ok(await runCli(['init'], { env, cwd: work }));
    const customer = ok(await runCli(['customer', 'create', '--name', 'Acme', '--json'], { env, cwd: work })).json();
    ok(await runCli(['entitlement', 'create', '--code', 'seats', '--name', 'Seats'], { env, cwd: work }));
    const license = ok(await runCli(['license', 'create', '--customer', customer.id, '--type', 'hybrid', '--valid-until', '2099-01-01', '--entitlement', 'seats:3', '--with-decryption-key', '--json'], { env, cwd: work })).json();
    const oldFile = path.join(work, 'first-key.lic');
    ok(await runCli(['license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'machine-1', '--out', oldFile], { env, cwd: work }));
    ok(await runCli(['signing-key', 'rotate'], { env, cwd: work }));
    const newFile = path.join(work, 'second-key.lic');
    ok(await runCli(['license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'machine-2', '--out', newFile], { env, cwd: work }));
    ok(await runCli(['token', 'create', '--name', 'ops', '--json'], { env, cwd: work }));
    seedHostileRows(source, customer.id as string, license.id as string);
    const original = readSqlite(source);
    const lastAuditId = BigInt(original.audit_log!.length > 0 ? Math.max(...original.audit_log!.map((row) => Number((JSON.parse(row) as Array<[string, string]>)[0]![1]))) : 0);
    for (const table of TABLES) assert.ok(original[table.name]!.length > 0, `the generated database has rows in ${table.name}`);

    const sqliteBackup = ok(await runCli(['backup', 'create', '--json'], { env, cwd: work })).json();
    const toPostgres = { LICENSE_DATABASE_URL: postgresUrl!, LICENSE_BACKUP_PATH: path.join(work, 'pg-backups') };
    const report = ok(await runCli(['backup', 'restore', path.join(work, 'sqlite-backups', sqliteBackup.file), '--yes', '--json'], { env: toPostgres, cwd: work })).json();
    assert.deepEqual({ from: report.moved.from, to: report.moved.to }, { from: 'sqlite', to: 'postgres' });
    assert.equal(report.engine, 'sqlite');
    assert.equal(report.migrated_to, SCHEMA_VERSION);
    // A backup's own audit entry (backup.created) is written after its snapshot.
    for (const table of TABLES) assert.equal(report.moved.rows[table.name], original[table.name]!.length, `rows moved of ${table.name}`);
    const inPostgres = await readPostgres(postgresUrl!);
    for (const table of TABLES) {
      const compared = table.name === 'audit_log' ? withoutAuditAfter(inPostgres, lastAuditId).audit_log : inPostgres[table.name];
      assert.deepEqual(compared, original[table.name], `${table.name} on PostgreSQL`);
    }
    const auditAfter = inPostgres.audit_log!.map((row) => Object.fromEntries(JSON.parse(row) as Array<[string, unknown]>));
    assert.deepEqual(auditAfter.filter((row) => BigInt(row.id as string) > lastAuditId).map((row) => row.action), ['backup.restored']);
    for (const [file, hardwareId] of [[oldFile, 'machine-1'], [newFile, 'machine-2']] as const) {
      ok(await runCli(['license', 'verify', file, '--hardware-id', hardwareId], { env: toPostgres, cwd: work }));
    }
    // The audit identity continues after the largest id that came over.
    const maxMoved = Math.max(...auditAfter.map((row) => Number(row.id)));
    ok(await runCli(['customer', 'create', '--name', 'After the move'], { env: toPostgres, cwd: work }));
    const next = ok(await runCli(['audit', 'list', '--json', '--limit', '1'], { env: toPostgres, cwd: work })).json();
    assert.equal(Number((next.items ?? next)[0].id), maxMoved + 1);

    // And back: the PostgreSQL backup into a new SQLite file.
    const postgresBackup = ok(await runCli(['backup', 'create', '--json'], { env: toPostgres, cwd: work })).json();
    const back = path.join(work, 'back', 'license-server.db');
    const toSqlite = { LICENSE_DATABASE_URL: back, LICENSE_BACKUP_PATH: path.join(work, 'back-backups') };
    const backReport = ok(await runCli(['backup', 'restore', path.join(work, 'pg-backups', postgresBackup.file), '--yes', '--json'], { env: toSqlite, cwd: work })).json();
    assert.deepEqual({ from: backReport.moved.from, to: backReport.moved.to }, { from: 'postgres', to: 'sqlite' });
    const inSqlite = readSqlite(back);
    for (const table of TABLES) {
      const expected = table.name === 'audit_log' ? original.audit_log : table.name === 'customers' ? inPostgres.customers!.length + 1 : original[table.name];
      if (table.name === 'customers') {
        assert.equal(inSqlite.customers!.length, expected);
        assert.deepEqual(inSqlite.customers!.filter((row) => original.customers!.includes(row)), original.customers, 'customers after the round trip');
        continue;
      }
      const compared = table.name === 'audit_log' ? withoutAuditAfter(inSqlite, lastAuditId).audit_log : inSqlite[table.name];
      assert.deepEqual(compared, expected, `${table.name} back on SQLite`);
    }
    for (const [file, hardwareId] of [[oldFile, 'machine-1'], [newFile, 'machine-2']] as const) {
      ok(await runCli(['license', 'verify', file, '--hardware-id', hardwareId], { env: toSqlite, cwd: work }));
    }
    // SQLite's AUTOINCREMENT continues after the largest id too.
    const maxBack = Math.max(...inSqlite.audit_log!.map((row) => Number((JSON.parse(row) as Array<[string, string]>)[0]![1])));
    ok(await runCli(['customer', 'create', '--name', 'After the move back'], { env: toSqlite, cwd: work }));
    const nextBack = ok(await runCli(['audit', 'list', '--json', '--limit', '1'], { env: toSqlite, cwd: work })).json();
    assert.equal(Number((nextBack.items ?? nextBack)[0].id), maxBack + 1);
    // The restored store signs with the key that was active on SQLite.
    const checkout = path.join(work, 'after.lic');
    ok(await runCli(['license', 'checkout', license.id, '--ttl-days', '1', '--hardware-id', 'machine-3', '--out', checkout], { env: toSqlite, cwd: work }));
    ok(await runCli(['license', 'verify', checkout, '--hardware-id', 'machine-3'], { env: toPostgres, cwd: work }));
  });

  it('migrates a backup of an older schema after moving it, both ways', async () => {
    const { migrate } = await import('../../src/lib/storage/migrations.js');
    const { createBackup } = await import('../../src/lib/backup/create.js');
    const { resolveConfig } = await import('../../src/lib/config/resolve.js');
    const { openDatabase } = await import('../../src/lib/storage/open.js');
    const { createTestDatabase, dropTestDatabase } = await import('../support/postgres.js');
    const customer = "INSERT INTO customers (id, name, active, created_at, updated_at) VALUES ('00000000-0000-4000-8000-000000000001', 'From an old schema', true, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')";
    const oldBackup = async (url: string, version: number, directory: string) => {
      const db = await openDatabase(url, { migrate: false });
      try {
        await migrate(db, version);
        await db.execute(url.startsWith('postgres') ? customer : customer.replace('true', '1'));
        const config = await resolveConfig({ env: { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: directory }, cwd: work });
        // As a pre-restore backup, which raises no event: today's event query reads customers.email
        // (schema 7), which these old schemas lack (as in backup-signing-keys.test.ts).
        const record = await createBackup({ db, config, trigger: 'pre-restore', toolVersion: 'old', context: { actor: 'test' } });
        assert.equal(record.schema_version, version);
        return path.join(directory, record.file);
      } finally {
        await db.close();
      }
    };
    const names = async (url: string) => {
      const db = await openDatabase(url);
      try {
        return (await db.query('SELECT name FROM customers')).map((row) => row.name);
      } finally {
        await db.close();
      }
    };

    const fromSqlite = await oldBackup(path.join(work, 'v3', 'license-server.db'), 3, path.join(work, 'v3-backups'));
    const target = await createTestDatabase();
    try {
      const report = ok(await runCli(['backup', 'restore', fromSqlite, '--yes', '--json'], { env: { LICENSE_DATABASE_URL: target, LICENSE_BACKUP_PATH: path.join(work, 'v3-target') }, cwd: work })).json();
      assert.deepEqual([report.schema_version, report.migrated_to, report.moved.from], [3, SCHEMA_VERSION, 'sqlite']);
      assert.deepEqual(await names(target), ['From an old schema']);
    } finally {
      await dropTestDatabase(target);
    }

    const source = await createTestDatabase();
    try {
      const fromPostgres = await oldBackup(source, 1, path.join(work, 'v1-backups'));
      const file = path.join(work, 'v1-target', 'license-server.db');
      const report = ok(await runCli(['backup', 'restore', fromPostgres, '--yes', '--json'], { env: { LICENSE_DATABASE_URL: file, LICENSE_BACKUP_PATH: path.join(work, 'v1-target', 'backups') }, cwd: work })).json();
      assert.deepEqual([report.schema_version, report.migrated_to, report.moved.from], [1, SCHEMA_VERSION, 'postgres']);
      assert.deepEqual(await names(file), ['From an old schema']);
    } finally {
      await dropTestDatabase(source);
    }
  });

  // The converted backup keeps its schema until it is migrated after the swap: a machine
  // deactivated in the replaced store is carried into it without machine_key (schema 13).
  it('carries a machine deactivated after a backup of schema 12 into it across engines, both ways', async () => {
    const { oldSchemaStore } = await import('../support/old-schema-store.js');
    const { createTestDatabase, dropTestDatabase } = await import('../support/postgres.js');
    const databases: string[] = [];
    try {
      const postgres = async () => {
        databases.push(await createTestDatabase());
        return databases.at(-1)!;
      };
      const ways = [
        { from: path.join(work, 'm12-sqlite', 'license-server.db'), to: await postgres(), name: 'sqlite-to-postgres' },
        { from: await postgres(), to: path.join(work, 'm12-target', 'license-server.db'), name: 'postgres-to-sqlite' },
      ];
      for (const way of ways) {
        const { licenseId, backupFile } = await oldSchemaStore(way.from, 12, { backupPath: path.join(work, `${way.name}-backups`), cwd: work });
        const env = { LICENSE_DATABASE_URL: way.to, LICENSE_BACKUP_PATH: path.join(work, `${way.name}-target-backups`) };
        const cli = (...args: string[]) => runCli(args, { env, cwd: work });
        ok(await cli('backup', 'restore', backupFile, '--yes'));
        const checkout = (host: string) => cli('license', 'checkout', licenseId, '--ttl-days', '1', '--hardware-id', host, '--out', path.join(work, `${way.name}-${host}-${randomUUID()}.lic`));
        ok(await checkout('MOVED-HOST'));
        const [machine] = ok(await cli('machine', 'list', '--license', licenseId, '--json')).json();
        ok(await cli('machine', 'deactivate', machine.id));

        const report = ok(await cli('backup', 'restore', backupFile, '--yes', '--json')).json();
        assert.deepEqual([report.schema_version, report.migrated_to, report.moved.to], [12, SCHEMA_VERSION, way.name.endsWith('postgres') ? 'postgres' : 'sqlite'], way.name);
        assert.deepEqual(report.revocations.machines, [{ id: machine.id, license_id: licenseId, hardware_id: 'MOVED-HOST' }], way.name);
        const again = await checkout('MOVED-HOST');
        assert.equal(again.code, 6, `${way.name}: ${again.stderr}`);
        assert.match(again.stderr, /MACHINE_DEACTIVATED/);
      }
    } finally {
      for (const url of databases) await dropTestDatabase(url);
    }
  });

  // Issue 35, item 11: the restore raises backup.restored in a transaction on the restored
  // store; a rule that matched it read the notification settings with three statements at
  // once on that transaction's one connection, and pg warned. The CLI runs with the guard of
  // test/support/pg-overlap.ts, which ends the process on that warning (exit 70).
  it('a SQLite backup whose rules match backup.restored is restored onto PostgreSQL without a statement sent to a busy connection', async () => {
    const { createTestDatabase, dropTestDatabase } = await import('../support/postgres.js');
    const { startReceiver } = await import('../support/receiver.js');
    const receiver = await startReceiver();
    const source = path.join(work, 'rules', 'license-server.db');
    const env = { LICENSE_DATABASE_URL: source, LICENSE_BACKUP_PATH: path.join(work, 'rules-backups') };
    const target = await createTestDatabase();
    try {
      ok(await runCli(['init'], { env, cwd: work }));
      const settings = path.join(work, 'rules.json');
      writeFileSync(settings, JSON.stringify({ webhooks: [{ name: 'ops', url: receiver.url, secret: 'restore-overlap-0123456789' }], rules: [{ event: 'backup.*', webhook: 'ops' }, { event: 'backup.restored', email: 'ops@example.com' }] }));
      ok(await runCli(['notifications', 'set', '--file', settings], { env, cwd: work }));
      const backup = ok(await runCli(['backup', 'create', '--json'], { env, cwd: work })).json();
      const toPostgres = { LICENSE_DATABASE_URL: target, LICENSE_BACKUP_PATH: path.join(work, 'rules-target') };
      const report = ok(await runCli(['backup', 'restore', path.join(work, 'rules-backups', backup.file), '--yes', '--json'], { env: toPostgres, cwd: work })).json();
      assert.equal(report.moved.to, 'postgres');
      const events = await (async () => {
        const client = new pg.Client({ connectionString: target });
        await client.connect();
        try {
          return (await client.query<{ event: string; channel: string }>('SELECT event, channel FROM notification_deliveries ORDER BY channel')).rows;
        } finally {
          await client.end();
        }
      })();
      assert.deepEqual(events.filter((row) => row.event === 'backup.restored'), [{ event: 'backup.restored', channel: 'email' }, { event: 'backup.restored', channel: 'webhook' }]);
    } finally {
      await receiver.close();
      await dropTestDatabase(target);
    }
  });
});

/** Rows in every table the CLI did not fill, and hostile values in every column kind. */
function seedHostileRows(file: string, customerId: string, licenseId: string): void {
  const db = new (loadSqliteDriver())(file);
  try {
    db.pragma('foreign_keys = ON');
    const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
    const insertCustomer = db.prepare('INSERT INTO customers (id, name, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?)');
    HOSTILE.forEach((name, i) => insertCustomer.run(uuid(i + 1), name, i % 2, i === 0 ? '0001-01-01T00:00:00.000Z' : '2026-11-23T10:15:00.123Z', i === 0 ? '9999-12-31T23:59:59.999Z' : '0050-06-15T12:00:00.001Z'));
    // Upper-case ids stay the same id (PostgreSQL prints uuids in lower case).
    insertCustomer.run('ABCDEF00-0000-4000-8000-000000000099', 'Upper-case id', 1, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
    const metadata = JSON.stringify({ text: HOSTILE.slice(0, 8), nested: { deep: [{ x: null }, true, false] }, numbers: [0, -1, 1.5, 1e300, 12345678901234567890, -0], '\u2028key\t': 'value\\', escaped: '\u00e9' });
    const key = Buffer.from(Array.from({ length: 32 }, (_, i) => [0x00, 0x09, 0x0a, 0x0d, 0x5c, 0x22, 0x27, 0xff][i % 8]! ^ (i >> 3)));
    db.prepare(`INSERT INTO licenses (id, license_key, customer_id, type, active, valid_from, valid_until, decryption_key, created_at, updated_at, max_machines, floating, lease_hours, metadata)
      VALUES (?, ?, ?, 'usage_based', 0, '2026-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z', ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 9007199254740993, 1, 720, ?)`)
      .run(uuid(100), 'K\\\t\n-HOSTILE', uuid(1), key, metadata);
    const entitlement = (db.prepare("SELECT id FROM entitlements WHERE code = 'seats'").get() as { id: string }).id;
    db.prepare("INSERT INTO entitlements (id, code, name, created_at) VALUES (?, 'b\\\\ü\t', 'Hostile \\N', '2026-01-01T00:00:00.000Z')").run(uuid(200));
    db.prepare('INSERT INTO license_entitlements (license_id, entitlement_id, usage_limit, used) VALUES (?, ?, ?, ?)').run(uuid(100), uuid(200), 9223372036854775807n, 0);
    db.prepare('INSERT INTO license_entitlements (license_id, entitlement_id, usage_limit, used) VALUES (?, ?, NULL, 42)').run(uuid(100), entitlement);
    const usage = db.prepare('INSERT INTO usage_records (id, license_id, entitlement_id, idempotency_key, hardware_id, quantity, remaining, occurred_at, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    usage.run(uuid(300), licenseId, entitlement, 'idem\t\\.\n', HOSTILE[6]!, 1, null, '2026-11-23T10:15:00.000Z', '2026-11-23T10:15:00.001Z');
    usage.run(uuid(301), uuid(100), uuid(200), 'big', 'hw', 9007199254740993n, 9223372036854775806n, '2026-11-23T10:15:00.000Z', '2026-11-23T10:15:00.001Z');
    db.prepare(`INSERT INTO machines (id, license_id, hardware_id, name, client_version, active, first_seen, last_seen, lease_expires_at, offline_until, deactivated_at)
      VALUES (?, ?, ?, ?, NULL, 0, '2026-01-01T00:00:00.000Z', '2026-11-23T10:15:00.000Z', NULL, '2027-01-01T00:00:00.000Z', '2026-11-23T10:16:00.000Z')`).run(uuid(400), licenseId, 'hw\\tab\t', HOSTILE[1]!);
    db.prepare('INSERT INTO audit_log (occurred_at, actor, action, entity_type, entity_id, details) VALUES (?, ?, ?, ?, ?, ?)')
      .run('2026-11-23T10:15:00.000Z', 'cli:\\root\t', 'test.hostile', 'customer', null, JSON.stringify({ lines: HOSTILE.slice(0, 6), unicode: '\u{1F600}\u2028', n: 1e-300 }));
    db.prepare("INSERT INTO notification_email_templates (event, subject, body, updated_at) VALUES ('license.expiring', ?, ?, '2026-01-01T00:00:00.000Z')").run('Subject \\N', 'Body\n\\.\nline after a lone \\.\r\n');
    db.prepare("INSERT INTO notification_webhooks (id, name, url, secret, enabled, created_at, updated_at) VALUES (?, 'hook\t1', 'https://example.com/h?a=1&b=\\\\', 'whsec\\\\\t', 1, '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z')").run(uuid(500));
    db.prepare("INSERT INTO notification_alert_rules (id, event, webhook_id, email_to, enabled, created_at) VALUES (?, 'license.expiring', ?, NULL, 0, '2026-01-01T00:00:00.000Z')").run(uuid(501), uuid(500));
    db.prepare("INSERT INTO notification_alert_rules (id, event, webhook_id, email_to, enabled, created_at) VALUES (?, 'backup.failed', NULL, 'ops@example.com', 1, '2026-01-01T00:00:00.000Z')").run(uuid(502));
    db.prepare("INSERT INTO backup_runs (slot, claimed_by, claimed_at, finished_at, status, backup_id, error) VALUES ('2026-11-23T03:00:00.000Z', 'host\\1:42', '2026-11-23T03:00:00.005Z', NULL, 'failed', NULL, ?)").run('FILE_WRITE_FAILED: no space\nsecond line\t\\');
    // Given up: no command of the test sends it, so it moves as it is.
    db.prepare(`INSERT INTO notification_deliveries (id, event_id, event, occurred_at, data, channel, target, status, attempts, next_attempt_at, retry_from,
      claimed_by, claimed_until, last_attempt_at, last_status, last_error, delivered_at, created_at)
      VALUES (?, ?, 'backup.failed', '2026-11-23T03:00:00.006Z', ?, 'email', ?, 'failed', 31, '2026-11-24T03:00:00.006Z', '2026-11-23T03:00:00.006Z',
      'host\\1:42', NULL, '2026-11-24T03:00:00.006Z', NULL, ?, NULL, '2026-11-23T03:00:00.006Z')`)
      .run(uuid(600), uuid(601), JSON.stringify({ error: HOSTILE.slice(0, 6), n: 9007199254740993 }), 'ops@example.com', 'SMTP 451 4.3.0 try again\nlater\t\\');
    db.prepare("INSERT INTO notification_marks (key, at, count) VALUES (?, '2026-11-23T03:00:00.007Z', 9007199254740993)").run(`license.expired:${uuid(100)}:9999-12-31T23:59:59.999Z\t\\`);
    // A copy that failed, of a backup this host may no longer hold: its bookkeeping moves as it is.
    db.prepare(`INSERT INTO backup_copies (backup_id, target, status, attempts, next_attempt_at, claimed_by, claimed_until, last_attempt_at, last_error, copied_at, created_at)
      VALUES ('20261123T030000000Z-abcdef', 'offsite', 'failed', 9007199254740993, '2026-11-23T04:00:00.008Z', 'host\\1:42', NULL, '2026-11-23T03:00:00.008Z', ?, NULL, '2026-11-23T03:00:00.008Z')`)
      .run('target offsite: no answer within 30 s\nsecond line\t\\');
    // An answered activation request: its nonce, license and machine move as they are.
    db.prepare(`INSERT INTO activation_requests (nonce, license_id, hardware_id, created_at, used_at, request_digest)
      VALUES ('AAECAwQFBgcICQoLDA0ODw', ?, ?, '2026-11-23T03:00:00.000Z', '2026-11-23T03:00:00.009Z', 'ulmX9wksFgzBNNGyFEObWqyWBYcy6Ai2YsDHDvj933Q')`).run(licenseId, HOSTILE[1]!);
    // One recorded before request digests (schema 13): it moves without one.
    db.prepare(`INSERT INTO activation_requests (nonce, license_id, hardware_id, created_at, used_at, request_digest)
      VALUES ('AAECAwQFBgcICQoLDA0OEA', ?, 'hw2-before-digests', '2026-11-23T03:00:00.000Z', '2026-11-23T03:00:00.010Z', NULL)`).run(licenseId);
    // A bulk job stopped mid-way: its filter, bound, position and row errors move as they are, so it resumes where it was.
    db.prepare(`INSERT INTO bulk_jobs (id, target, action, span, filters, state, total, bound, position, changed, unchanged, failed, errors, error, resumed,
        created_by, created_at, started_at, finished_at, claimed_by, claimed_until)
      VALUES (?, 'licenses', 'extend', '30d', ?, 'queued', 9007199254740993, ?, ?, 3, 0, 1, ?, NULL, 2, ?, '2026-11-23T03:00:00.011Z', '2026-11-23T03:00:00.012Z', NULL, NULL, NULL)`)
      .run(uuid(600), JSON.stringify({ customer_id: customerId, type: HOSTILE[2] }), JSON.stringify(['2026-11-23T03:00:00.000Z', uuid(100)]), JSON.stringify(['2026-01-01T00:00:00.000Z', licenseId]),
        JSON.stringify([{ id: licenseId, code: 'LICENSE_INACTIVE', message: HOSTILE[6] }]), `token:${HOSTILE[5]}`);
  } finally {
    db.close();
  }
}
