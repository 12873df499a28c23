import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { writeArchive } from '../../../src/lib/backup/archive/archive.js';
import { dumpPostgres } from '../../../src/lib/backup/engines/postgres-dump.js';
import { loadDump } from '../../../src/lib/backup/engines/postgres-load.js';
import { loadDumpIntoScratch } from '../../../src/lib/backup/engines/postgres-restore.js';
import { migrate, SCHEMA_VERSION, TABLES } from '../../../src/lib/storage/migrations.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import { ok, runCli } from '../../support/cli.js';
import { createTestDatabase, dropTestDatabase, onDatabase, requirePostgres } from '../../support/postgres.js';

const VECTOR = new URL('../../vectors/postgres-dump-layout-1.sql', import.meta.url);


/**
 * What a restore must reproduce exactly: every column (in order, with type, collation,
 * default, NOT NULL, identity), every constraint and index by name and definition, every
 * sequence. Later migrations ALTER and DROP constraints by name, so names count.
 */
function catalogOf(url: string): Promise<Record<string, unknown[]>> {
  return onDatabase(url, async (client) => {
    const rows = async (sql: string) => (await client.query(sql)).rows;
    return {
      relations: await rows(`SELECT relname, relkind, relpersistence, reloptions FROM pg_class WHERE relnamespace = current_schema()::regnamespace ORDER BY relname`),
      columns: await rows(`
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull, a.attidentity, a.attgenerated,
               a.attcollation::regcollation::text AS collation, pg_get_expr(d.adbin, d.adrelid) AS default_expr,
               pg_get_serial_sequence(quote_ident(c.relname), a.attname) AS sequence
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY c.relname, a.attnum`),
      constraints: await rows(`
        SELECT conrelid::regclass::text AS "table", conname, contype, pg_get_constraintdef(oid) AS definition, convalidated,
               condeferrable, condeferred, conindid::regclass::text AS index, confrelid::regclass::text AS "references"
        FROM pg_constraint WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2`),
      indexes: await rows(`
        SELECT indexrelid::regclass::text AS name, indrelid::regclass::text AS "table", pg_get_indexdef(indexrelid) AS definition, indisunique, indisprimary
        FROM pg_index JOIN pg_class ON pg_class.oid = indexrelid WHERE relnamespace = current_schema()::regnamespace ORDER BY 1`),
      sequences: await rows(`
        SELECT seqrelid::regclass::text AS name, seqtypid::regtype::text AS type, seqstart, seqincrement, seqmax, seqmin, seqcache, seqcycle
        FROM pg_sequence JOIN pg_class ON pg_class.oid = seqrelid WHERE relnamespace = current_schema()::regnamespace ORDER BY 1`),
    };
  });
}

/** Every row of every table as text, sorted, plus the audit log's next id. */
function rowsOf(url: string): Promise<Record<string, string[]>> {
  return onDatabase(url, async (client) => {
    const out: Record<string, string[]> = {};
    for (const table of TABLES) {
      // A dump of an older schema lacks the tables of later versions.
      if ((await client.query('SELECT to_regclass($1) AS t', [table.name])).rows[0].t === null) continue;
      out[table.name] = (await client.query(`SELECT t::text AS row FROM ${table.name} t`)).rows.map((row) => String(row.row)).sort();
    }
    out.next_audit_id = [(await client.query(`SELECT last_value::text || is_called::text AS v FROM audit_log_id_seq`)).rows[0].v];
    return out;
  });
}

/** The dump itself, from its compressed members, written to `target`. */
function decompress(compressed: string, target: string): string {
  writeFileSync(target, gunzipSync(readFileSync(compressed)));
  return target;
}

describe('PostgreSQL dump (database/postgres.sql)', () => {
  let work: string;
  let source: string;
  const databases: string[] = [];
  const fresh = async () => {
    const url = await createTestDatabase();
    databases.push(url);
    return url;
  };

  before(async function () {
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-pg-dump-'));
    source = await fresh();
    await (await openDatabase(source)).close();
    // A row of every table, with the text COPY has to escape, and a last column ending in `\.`.
    await onDatabase(source, (client) =>
      client.query(`
        INSERT INTO customers VALUES ('00000000-0000-4000-8000-000000000001', E'back\\\\slash\\ttab\\nnewline "q" ü', true, '2026-11-23 10:15:00.123+00', now());
        INSERT INTO entitlements VALUES ('00000000-0000-4000-8000-000000000002', 'seats', 'Seats', now());
        INSERT INTO licenses (id, license_key, customer_id, type, active, valid_from, valid_until, decryption_key, created_at, updated_at, metadata)
          VALUES ('00000000-0000-4000-8000-000000000003', 'KEY-1', '00000000-0000-4000-8000-000000000001', 'hybrid', true, '2025-01-01', '2099-01-01', decode(repeat('ab', 32), 'hex'), now(), now(), '{"a": [1, "\\\\."]}');
        INSERT INTO license_entitlements VALUES ('00000000-0000-4000-8000-000000000003', '00000000-0000-4000-8000-000000000002', 5, 2);
        INSERT INTO signing_keys (id, algorithm, public_key, private_key, is_current, created_at, key_id) VALUES ('00000000-0000-4000-8000-000000000004', 'Ed25519', decode(repeat('01', 32), 'hex'), decode(repeat('02', 32), 'hex'), true, now(), '0123456789abcdef');
        INSERT INTO admin_tokens (id, name, token_hash, token_prefix, created_by, created_at) VALUES ('00000000-0000-4000-8000-000000000005', 'ops', 'hash', 'lsa_', 'test', now());
        INSERT INTO audit_log (occurred_at, actor, action, entity_type, entity_id, details) SELECT now(), 'test', 'x.y', 'license', n::text, jsonb_build_object('n', n) FROM generate_series(1, 500) n;
        DELETE FROM audit_log WHERE id > 490;
        INSERT INTO notification_email_templates VALUES ('backup.failed', 'Subject', E'Body\\nline', now());
        INSERT INTO notification_webhooks VALUES ('00000000-0000-4000-8000-000000000006', 'ops', 'https://example.com/hook', 'secret', true, now(), now());
        INSERT INTO notification_alert_rules VALUES ('00000000-0000-4000-8000-000000000007', 'backup.*', '00000000-0000-4000-8000-000000000006', NULL, true, now());
        INSERT INTO usage_records VALUES ('00000000-0000-4000-8000-000000000008', '00000000-0000-4000-8000-000000000003', '00000000-0000-4000-8000-000000000002', 'idem', 'hw', 2, 3, now(), now());
        INSERT INTO backup_runs VALUES ('2026-11-23 10:00:00+00', 'host', now(), NULL, 'failed', NULL, E'ends with \\\\.');
        INSERT INTO machines (id, license_id, hardware_id, name, active, first_seen, last_seen) VALUES ('00000000-0000-4000-8000-000000000009', '00000000-0000-4000-8000-000000000003', E'hw\\\\.', E'line\\nbreak', true, now(), now());
      `),
    );
  });
  after(async () => {
    for (const url of databases) await dropTestDatabase(url).catch(() => undefined);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('loads with psql alone into an empty database: the catalog the migrations make, names included, and the same rows', async () => {
    const dir = mkdtempSync(path.join(work, 'psql-'));
    const dump = await dumpPostgres(source, dir);
    const file = decompress(dump.compressed, path.join(work, 'psql.sql'));
    const text = readFileSync(file, 'utf8');
    assert.equal(dump.size, Buffer.byteLength(text));
    assert.match(text, new RegExp(`^-- schema version ${SCHEMA_VERSION}$`, 'm'));
    // The four comment lines docs/backup-format.md quotes, with N the schema version.
    const doc = readFileSync(new URL('../../../docs/backup-format.md', import.meta.url), 'utf8');
    const quoted = /^1\. These four comment lines[\s\S]*?```\n([\s\S]*?)```/m.exec(doc)![1]!.split('\n').map((line) => line.trim()).filter(Boolean);
    assert.deepEqual(text.split('\n').slice(0, 4), quoted.map((line) => line.replace('schema version N', `schema version ${SCHEMA_VERSION}`)));
    assert.match(text, /^COPY customers \("id", "name", "active", "created_at", "updated_at", "email"\) FROM stdin;\n00000000-0000-4000-8000-000000000001\tback\\\\slash\\ttab\\nnewline "q" ü\tt\t2026-11-23 10:15:00\.123\+00\t/m);
    // Keys and indexes come after the rows, as pg_dump writes them.
    assert.ok(text.indexOf('ADD CONSTRAINT licenses_pkey') > text.indexOf('COPY machines'));
    const target = await fresh();
    execFileSync('psql', ['--single-transaction', '-v', 'ON_ERROR_STOP=1', '-q', '-d', target, '-f', file], { stdio: 'pipe' });
    assert.deepEqual(await catalogOf(target), await catalogOf(source));
    assert.deepEqual(await rowsOf(target), await rowsOf(source));
  });

  it('hashes the dump as it compresses it: the members decompress to bytes of the size and SHA-256 reported', async () => {
    const dump = await dumpPostgres(source, mkdtempSync(path.join(work, 'digest-')));
    const text = gunzipSync(readFileSync(dump.compressed));
    assert.deepEqual([dump.size, dump.sha256], [text.length, createHash('sha256').update(text).digest('hex')]);
    assert.ok(readFileSync(dump.compressed).length < text.length);
  });

  it('writes timestamps in UTC and ISO form whatever the database\'s own settings', async () => {
    const name = new URL(source).pathname.slice(1);
    await onDatabase(source, (client) => client.query(`ALTER DATABASE ${name} SET TimeZone = 'America/New_York'; ALTER DATABASE ${name} SET DateStyle = 'SQL, DMY'`));
    try {
      const dump = await dumpPostgres(source, mkdtempSync(path.join(work, 'tz-')));
      const text = gunzipSync(readFileSync(dump.compressed)).toString('utf8');
      assert.match(text, /\t2026-11-23 10:15:00\.123\+00\t/);
      assert.match(text, /^2026-11-23 10:00:00\+00\thost\t/m);
    } finally {
      await onDatabase(source, (client) => client.query(`ALTER DATABASE ${name} RESET TimeZone; ALTER DATABASE ${name} RESET DateStyle`));
    }
  });

  it('loads through the restore path (COPY FREEZE, indexes last) whatever the size of the reads', async () => {
    const dump = await dumpPostgres(source, mkdtempSync(path.join(work, 'load-')));
    const file = decompress(dump.compressed, path.join(work, 'load.sql'));
    const expected = { catalog: await catalogOf(source), rows: await rowsOf(source) };
    for (const readSize of [1, 2, 3, 5, 4096, 1024 * 1024]) {
      const target = await fresh();
      await onDatabase(target, async (client) => {
        await client.query('BEGIN');
        await loadDump(client, file, { readSize });
        await client.query('COMMIT');
      });
      assert.deepEqual({ catalog: await catalogOf(target), rows: await rowsOf(target) }, expected, `read size ${readSize}`);
      await dropTestDatabase(target);
    }
  });

  it('never builds an index held back that a later statement drops (a dump replaying migration 6)', async () => {
    const dir = mkdtempSync(path.join(work, 'drop-'));
    const file = path.join(dir, 'dump.sql');
    writeFileSync(file, 'CREATE TABLE t (a integer);\nCREATE INDEX t_a ON t (a);\nCOPY t (a) FROM stdin;\n1\n\\.\nDROP INDEX t_a;\nCREATE INDEX t_a_again ON t (a);\n');
    const target = await fresh();
    await onDatabase(target, async (client) => {
      await client.query('BEGIN');
      await loadDump(client, file);
      await client.query('COMMIT');
      const indexes = (await client.query("SELECT indexname FROM pg_indexes WHERE tablename = 't' ORDER BY 1")).rows.map((row) => row.indexname);
      assert.deepEqual(indexes, ['t_a_again']);
    });
  });

  it('still loads a dump of the first layout (the migrations\' statements, keys before rows)', async () => {
    // The vector's own schema version (5): a restore migrates it further afterwards.
    const migrated = await fresh();
    const db = await openDatabase(migrated, { migrate: false });
    await migrate(db, 5);
    await db.close();
    for (const readSize of [3, 1024 * 1024]) {
      const target = await fresh();
      await onDatabase(target, async (client) => {
        await client.query('BEGIN');
        await loadDump(client, VECTOR.pathname, { readSize });
        await client.query('COMMIT');
      });
      assert.deepEqual(await catalogOf(target), await catalogOf(migrated));
      const rows = await rowsOf(target);
      assert.deepEqual(rows.machines!.map((row) => row.split(',').slice(2, 4).join(',')), ['"hw\\\\.","line\nbreak"']);
      assert.equal(rows.audit_log!.length, 5);
    }
    assert.equal(await loadDumpIntoScratch(source, VECTOR.pathname), 17);
  });

  it('restores and validates a backup holding a first-layout dump', async () => {
    const dump = readFileSync(VECTOR);
    const entries = [
      { name: 'config/effective.json' as const, data: Buffer.from('[]\n') },
      { name: 'notifications.json' as const, data: Buffer.from('{"email_templates": [], "webhooks": [], "alert_rules": []}\n') },
    ];
    const manifest = {
      format: 'license-server-backup',
      format_version: 1,
      backup_id: '20261123T100000000Z-0a1b2c',
      created_at: '2026-11-23T10:00:00.000Z',
      tool_version: '0.1.0',
      engine: 'postgres',
      schema_version: 5,
      trigger: 'manual',
      entries: [{ name: 'database/postgres.sql', data: dump }, ...entries].map((entry) => ({
        name: entry.name,
        size: entry.data.length,
        sha256: createHash('sha256').update(entry.data).digest('hex'),
      })),
    };
    const manifestBytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
    const file = path.join(work, `${manifest.backup_id}.backup.tar.gz`);
    await writeArchive(file, [
      { name: 'manifest.json', data: manifestBytes, size: manifestBytes.length },
      { name: 'database/postgres.sql', data: dump, size: dump.length },
      ...entries.map((entry) => ({ ...entry, size: entry.data.length })),
    ]);
    const target = await fresh();
    const env = { LICENSE_DATABASE_URL: target, LICENSE_BACKUP_PATH: path.join(work, 'layout-1-backups') };
    const validated = ok(await runCli(['backup', 'validate', file, '--json'], { env, cwd: work })).json();
    assert.match(JSON.stringify(validated), /loaded into a scratch database \(17 rows\)/);
    ok(await runCli(['backup', 'restore', file, '--yes', '--json'], { env, cwd: work }));
    const names = ok(await runCli(['customer', 'list', '--json'], { env, cwd: work })).json().map((customer: { name: string }) => customer.name);
    assert.deepEqual(names, ['back\\slash & "quotes" ü']);
  });
});
