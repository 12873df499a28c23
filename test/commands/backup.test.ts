import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { buffer } from 'node:stream/consumers';
import { TABLES } from '../../src/lib/storage/migrations.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { runCli, type CliResult, ok } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';


function refused(result: CliResult, exit: number, code: string, message?: RegExp): void {
  assert.equal(result.code, exit, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.match(result.stderr, new RegExp(`\\(${code}\\)`));
  if (message) assert.match(result.stderr, message);
  assert.ok(!/\n\s+at /.test(result.stderr), 'no stack trace');
}

/** Every row of every table, normalised so two databases of one engine compare equal. */
async function dumpRows(url: string): Promise<Record<string, unknown[]>> {
  const db = await openDatabase(url, { migrate: false });
  try {
    const out: Record<string, unknown[]> = {};
    for (const table of TABLES) {
      const rows = await db.query(`SELECT * FROM ${table.name}`);
      out[table.name] = rows
        .map((row) => JSON.stringify(Object.entries(row).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString('hex') : v instanceof Date ? v.toISOString() : v])))
        .sort();
    }
    return out;
  } finally {
    await db.close();
  }
}

const KEY = 'ab'.repeat(32);

forEachEngine('backups from the command line', (fixture) => {
  let work: string;
  let env: Record<string, string>;
  const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { env: { ...env, ...extra }, cwd: work });

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-backup-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(work, 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: KEY };
    ok(await cli(['init']));
    const customer = ok(await cli(['customer', 'create', '--name', 'Backed-up & Co <"ü">', '--json'])).json();
    ok(await cli(['entitlement', 'create', '--code', 'seats', '--name', 'Seats']));
    ok(await cli(['license', 'create', '--customer', customer.id, '--type', 'hybrid', '--valid-from', '2025-01-01', '--valid-until', '2099-01-01', '--entitlement', 'seats:5', '--with-decryption-key']));
    ok(await cli(['token', 'create', '--name', 'ops']));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('backup decrypt writes the plain .tar.gz whole or not at all, and never over an existing file', async () => {
    const created = ok(await cli(['backup', 'create', '--json'])).json();
    const file = path.join(work, 'backups', created.file);
    const out = path.join(work, 'plain.tar.gz');
    ok(await cli(['backup', 'decrypt', file, '--out', out]));
    assert.match(execFileSync('tar', ['-tzf', out], { encoding: 'utf8' }), /^manifest\.json$/m);
    assert.equal(statSync(out).mode & 0o777, 0o600);
    const before = readFileSync(out);
    refused(await cli(['backup', 'decrypt', file, '--out', out]), 5, 'FILE_EXISTS');
    assert.deepEqual(readFileSync(out), before, 'the existing file is untouched');

    // Damage a late chunk: earlier chunks authenticate, the later one does not.
    const damaged = path.join(work, 'damaged.enc');
    const bytes = readFileSync(file);
    bytes[bytes.length - 20]! ^= 0x01;
    writeFileSync(damaged, bytes);
    const second = path.join(work, 'second.tar.gz');
    refused(await cli(['backup', 'decrypt', damaged, '--out', second]), 13, 'BACKUP_CORRUPT');
    assert.deepEqual(readdirSync(work).filter((name) => name.startsWith('second')), [], 'no output and no partial file is left');
  });

  it('creates a verified, encrypted backup (0600 in a 0700 directory) that list shows and validate passes', async () => {
    const created = ok(await cli(['backup', 'create', '--json'])).json();
    assert.match(created.backup_id, /^\d{8}T\d{9}Z-[0-9a-f]{6}$/);
    assert.equal(created.encrypted, true);
    assert.equal(created.engine, fixture.engine);
    assert.equal(created.trigger, 'manual');
    const dir = path.join(work, 'backups');
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(path.join(dir, created.file)).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(dir).filter((name) => name.includes('partial') || name.startsWith('.tmp')), []);
    const listed = ok(await cli(['backup', 'list', '--json'])).json();
    assert.equal(listed[0].id, created.id);
    assert.equal(listed[0].backup_id, created.id, 'the deprecated alias');
    assert.deepEqual(Object.keys(listed[0]).sort(), ['backup_id', 'created_at', 'encrypted', 'engine', 'file', 'id', 'schema_version', 'sha256', 'signing_keys', 'size', 'tool_version', 'trigger', 'verified_at']);
    const validated = ok(await cli(['backup', 'validate', created.backup_id, '--json'])).json();
    assert.equal(validated.valid, true);
    assert.deepEqual(validated.checks.map((c: { check: string }) => c.check), ['archive', 'manifest', 'checksums', 'database']);
    const audit = ok(await cli(['audit', 'list', '--action', 'backup.created', '--json'])).json();
    assert.equal(audit[0].entity_id, created.backup_id);
  });

  it('makes an unencrypted backup, with a warning, that plain tar and gzip open', async () => {
    const result = ok(await cli(['backup', 'create'], { LICENSE_BACKUP_ENCRYPTION_KEY: '' }));
    assert.match(result.stderr, /^warning: backup\.encryption_key is not set: this backup is not encrypted/m);
    assert.match(result.stdout, /^created backup \S+: .* NOT encrypted, verified/);
    const file = ok(await cli(['backup', 'list', '--json'])).json()[0].file;
    const names = execFileSync('tar', ['-tzf', path.join(work, 'backups', file)], { encoding: 'utf8' }).trim().split('\n');
    assert.deepEqual(names, ['manifest.json', fixture.engine === 'sqlite' ? 'database/sqlite.db' : 'database/postgres.sql', 'config/effective.json', 'notifications.json']);
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', path.join(work, 'backups', file), 'manifest.json'], { encoding: 'utf8' }));
    assert.equal(manifest.format, 'license-server-backup');
    const effective = execFileSync('tar', ['-xzOf', path.join(work, 'backups', file), 'config/effective.json'], { encoding: 'utf8' });
    assert.ok(!effective.includes(KEY), 'the backup key is never inside a backup');
  });

  it('restores onto a second, empty data store with identical rows, the same signing key and valid old .lic files', async () => {
    const pem = ok(await cli(['signing-key', 'show'])).stdout;
    const license = ok(await cli(['license', 'list', '--json'])).json()[0];
    const lic = ok(await cli(['license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'm1', '--out', '-'])).stdout;
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    const before = await dumpRows(env.LICENSE_DATABASE_URL!);

    // A new host: only the file and the key.
    const host = path.join(work, 'new-host');
    mkdirSync(host);
    copyFileSync(path.join(work, 'backups', backup.file), path.join(host, backup.file));
    const target = await fixture.freshUrl();
    const hostEnv = { LICENSE_DATABASE_URL: target, LICENSE_BACKUP_PATH: path.join(host, 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: KEY };
    const restored = ok(await runCli(['backup', 'restore', path.join(host, backup.file), '--yes', '--json'], { env: hostEnv, cwd: host })).json();
    assert.equal(restored.backup_id, backup.backup_id);
    const after = await dumpRows(target);
    for (const table of TABLES) {
      if (table.name === 'audit_log') continue;
      assert.deepEqual(after[table.name], before[table.name], `table ${table.name}`);
    }
    // The audit log is the one taken with the snapshot plus the restore; the source also
    // recorded the backup's own creation, which happened after its snapshot.
    const actions = (rows: unknown[]) => rows.map((row) => (JSON.parse(row as string) as Array<[string, unknown]>).find(([k]) => k === 'action')![1]);
    const withoutLast = (rows: unknown[], action: string) => rows.filter((row) => !String(row).includes(`"${action}"`) || !String(row).includes(backup.backup_id));
    assert.deepEqual(withoutLast(after.audit_log!, 'backup.restored'), withoutLast(before.audit_log!, 'backup.created'));
    assert.ok(actions(after.audit_log!).includes('backup.restored'));
    assert.equal(ok(await runCli(['signing-key', 'show'], { env: hostEnv, cwd: host })).stdout, pem);
    assert.ok(verifyLicenseFile(lic, { publicKey: pem, hardwareId: 'm1' }), 'a file checked out before the disaster still verifies');
  });

  it('restores in place: a change made after the backup is gone, a pre-restore backup holds it', async () => {
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    const late = ok(await cli(['customer', 'create', '--name', 'Made after the backup', '--json'])).json();
    refused(await cli(['backup', 'restore', backup.backup_id]), 2, 'RESTORE_NOT_CONFIRMED', /pass --yes/);
    assert.ok(ok(await cli(['customer', 'list', '--json'])).json().some((c: { id: string }) => c.id === late.id), 'nothing changed');
    const report = ok(await cli(['backup', 'restore', backup.backup_id, '--yes', '--json'])).json();
    assert.ok(!ok(await cli(['customer', 'list', '--json'])).json().some((c: { id: string }) => c.id === late.id));
    const safety = ok(await cli(['backup', 'list', '--json'])).json().find((b: { backup_id: string }) => b.backup_id === report.pre_restore_backup_id);
    assert.equal(safety.trigger, 'pre-restore');
    const actions = ok(await cli(['audit', 'list', '--json'])).json().map((e: { action: string }) => e.action);
    assert.equal(actions[0], 'backup.restored');
  });

  it('refuses a wrong key, a missing key, damage anywhere, truncation and appended bytes, each with its code', async () => {
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    const file = path.join(work, 'backups', backup.file);
    const bytes = readFileSync(file);
    refused(await cli(['backup', 'validate', backup.backup_id], { LICENSE_BACKUP_ENCRYPTION_KEY: 'cd'.repeat(32) }), 14, 'BACKUP_WRONG_KEY', /backup was encrypted with a different key/);
    refused(await cli(['backup', 'validate', backup.backup_id], { LICENSE_BACKUP_ENCRYPTION_KEY: '' }), 14, 'BACKUP_KEY_REQUIRED');
    const damaged = path.join(work, 'damaged.backup.tar.gz.enc');
    const offsets = [10, 30, 44, 60, 500, Math.floor(bytes.length / 2), bytes.length - 20, bytes.length - 1];
    for (const offset of offsets) {
      const copy = Buffer.from(bytes);
      copy[offset] = copy[offset]! ^ 0x10;
      writeFileSync(damaged, copy);
      const result = await cli(['backup', 'validate', damaged]);
      assert.ok(result.code === 13 || result.code === 14, `offset ${offset}: exit ${result.code} ${result.stderr}`);
    }
    for (const cut of [0, 20, 44, 100, bytes.length - 16, bytes.length - 1]) {
      writeFileSync(damaged, bytes.subarray(0, cut));
      const result = await cli(['backup', 'validate', damaged]);
      assert.equal(result.code, 13, `cut at ${cut}: ${result.stderr}`);
    }
    writeFileSync(damaged, Buffer.concat([bytes, Buffer.from('appended')]));
    refused(await cli(['backup', 'validate', damaged]), 13, 'BACKUP_CORRUPT');
    refused(await cli(['backup', 'validate', '20991231T000000000Z-abcdef']), 4, 'BACKUP_NOT_FOUND');
    // On the command line a path is the operator's to give; it is read, never trusted.
    refused(await cli(['backup', 'validate', '/etc/passwd']), 13, 'BACKUP_INVALID', /not a license-server backup/);
    refused(await cli(['backup', 'validate', './no-such.backup.tar.gz']), 4, 'BACKUP_NOT_FOUND');
  });

  it('refuses archives with ../ or absolute entry names, writing nothing outside its work directory', async () => {
    for (const name of ['../escaped.txt', '/tmp/escaped-absolute.txt', 'database/../../escaped.txt']) {
      const pack = tar.pack();
      pack.entry({ name: 'manifest.json' }, '{}');
      pack.entry({ name }, 'owned');
      pack.finalize();
      const archive = path.join(work, 'evil.backup.tar.gz');
      writeFileSync(archive, gzipSync(await buffer(pack as unknown as NodeJS.ReadableStream)));
      const result = await cli(['backup', 'restore', archive, '--yes'], { LICENSE_BACKUP_ENCRYPTION_KEY: '' });
      assert.ok(result.code === 13, `${name}: ${result.stderr}`);
    }
    assert.ok(!existsSync(path.join(work, 'escaped.txt')) && !existsSync('/tmp/escaped-absolute.txt'));
    assert.ok(!readdirSync(path.dirname(work)).includes('escaped.txt'));
  });

  it('refuses a backup from a newer schema', async () => {
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      await db.execute('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [99, 'from the future', new Date().toISOString()]);
    } finally {
      await db.close();
    }
    const newer = await cli(['backup', 'create', '--json']);
    // This release refuses to even open a database migrated by a newer one, so a newer backup
    // is made by hand: the current one with its manifest saying schema 99.
    assert.equal(newer.code, 7);
    const db2 = await openDatabase(env.LICENSE_DATABASE_URL!, { migrate: false });
    try {
      await db2.execute('DELETE FROM schema_migrations WHERE version = 99');
    } finally {
      await db2.close();
    }
    const backup = ok(await cli(['backup', 'create', '--json'], { LICENSE_BACKUP_ENCRYPTION_KEY: '' })).json();
    const file = path.join(work, 'backups', backup.file);
    const extract = path.join(work, 'unpacked');
    mkdirSync(extract, { recursive: true });
    execFileSync('tar', ['-xzf', file, '-C', extract]);
    const manifest = JSON.parse(readFileSync(path.join(extract, 'manifest.json'), 'utf8'));
    manifest.schema_version = 99;
    writeFileSync(path.join(extract, 'manifest.json'), JSON.stringify(manifest));
    const future = path.join(work, 'future.backup.tar.gz');
    // -b 1: no padding after the end-of-archive marker, which a reader refuses (docs/backup-format.md).
    execFileSync('tar', ['-b', '1', '-czf', future, '-C', extract, 'manifest.json', ...manifest.entries.map((e: { name: string }) => e.name)]);
    refused(await cli(['backup', 'restore', future, '--yes'], { LICENSE_BACKUP_ENCRYPTION_KEY: '' }), 13, 'BACKUP_UNSUPPORTED', /schema version 99/);
  });

  it('prunes by retention and keeps the newest', async () => {
    const before = ok(await cli(['backup', 'list', '--json'])).json().length;
    assert.ok(before >= 3);
    const dry = ok(await cli(['backup', 'prune', '--dry-run', '--json'], { LICENSE_BACKUP_RETENTION_DAYS: '1', LICENSE_BACKUP_KEEP_DAILY: '0', LICENSE_BACKUP_KEEP_WEEKLY: '0', LICENSE_BACKUP_KEEP_MONTHLY: '0' })).json();
    assert.equal(dry.removed.length, 0, 'all are younger than a day');
    assert.equal(ok(await cli(['backup', 'list', '--json'])).json().length, before);
  });
});

describe('backups across schema versions and engines', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-backup-x-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('restores a backup of an older schema and migrates it', async () => {
    const { migrate, SCHEMA_VERSION } = await import('../../src/lib/storage/migrations.js');
    const { createBackup } = await import('../../src/lib/backup/create.js');
    const { resolveConfig } = await import('../../src/lib/config/resolve.js');
    const source = path.join(work, 'old', 'license-server.db');
    const env = { LICENSE_DATABASE_URL: source, LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    const db = await openDatabase(source, { migrate: false });
    try {
      await migrate(db, 1);
      await db.execute("INSERT INTO customers (id, name, active, created_at, updated_at) VALUES ('00000000-0000-4000-8000-000000000001', 'From v1', 1, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')");
      const config = await resolveConfig({ env, cwd: work });
      const record = await createBackup({ db, config, trigger: 'manual', toolVersion: 'old', context: { actor: 'test' } });
      assert.equal(record.schema_version, 1);
      const target = { ...env, LICENSE_DATABASE_URL: path.join(work, 'new', 'license-server.db') };
      const report = ok(await runCli(['backup', 'restore', record.backup_id, '--yes', '--json'], { env: target, cwd: work })).json();
      assert.deepEqual([report.schema_version, report.migrated_to], [1, SCHEMA_VERSION]);
      assert.deepEqual(ok(await runCli(['customer', 'list', '--json'], { env: target, cwd: work })).json().map((c: { name: string }) => c.name), ['From v1']);
    } finally {
      await db.close();
    }
  });

  it('lists backups while the database is down', async () => {
    const result = ok(await runCli(['backup', 'list', '--json'], { env: { LICENSE_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', LICENSE_BACKUP_PATH: path.join(work, 'backups') }, cwd: work }));
    assert.equal(result.json().length, 1);
  });
});

describe('PostgreSQL backups by hand', () => {
  let work: string;
  let source: string | undefined;
  let target: string | undefined;
  before(async function () {
    const { requirePostgres, createTestDatabase } = await import('../support/postgres.js');
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-backup-pg-'));
    source = await createTestDatabase();
    target = await createTestDatabase();
    ok(await runCli(['init'], { env: { LICENSE_DATABASE_URL: source }, cwd: work }));
  });
  after(async () => {
    const { dropTestDatabase } = await import('../support/postgres.js');
    for (const url of [source, target]) if (url) await dropTestDatabase(url);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('decrypted and decompressed as docs/backup-format.md says, the dump loads with psql alone', async () => {
    const env = { LICENSE_DATABASE_URL: source!, LICENSE_BACKUP_PATH: path.join(work, 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: KEY };
    const customer = ok(await runCli(['customer', 'create', '--name', 'Back\\slash & "quotes" ü', '--json'], { env, cwd: work })).json();
    ok(await runCli(['entitlement', 'create', '--code', 'seats', '--name', 'Seats'], { env, cwd: work }));
    ok(await runCli(['license', 'create', '--customer', customer.id, '--type', 'hybrid', '--valid-until', '2099-01-01', '--entitlement', 'seats:3', '--with-decryption-key'], { env, cwd: work }));
    const backup = ok(await runCli(['backup', 'create', '--json'], { env, cwd: work })).json();
    const doc = readFileSync(new URL('../../docs/backup-format.md', import.meta.url), 'utf8');
    writeFileSync(path.join(work, 'decrypt.mjs'), /### Decrypting by hand[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)![1]!);
    execFileSync(process.execPath, [path.join(work, 'decrypt.mjs'), path.join(work, 'backups', backup.file), KEY, path.join(work, 'plain.tar.gz')]);
    execFileSync('tar', ['-xzf', path.join(work, 'plain.tar.gz'), '-C', work, 'database/postgres.sql']);
    execFileSync('psql', ['--single-transaction', '-v', 'ON_ERROR_STOP=1', '-q', '-d', target!, '-f', path.join(work, 'database', 'postgres.sql')], { stdio: 'pipe' });
    const before = await dumpRows(source!);
    const after = await dumpRows(target!);
    for (const table of TABLES) {
      if (table.name !== 'audit_log') assert.deepEqual(after[table.name], before[table.name], table.name);
    }
    assert.equal(after.audit_log!.length, before.audit_log!.length - 1, 'all but the backup\'s own creation, which came after its snapshot');
  });

  it('takes a PostgreSQL advisory lock, so two hosts cannot back up one database at once', async () => {
    const pg = (await import('pg')).default;
    const holder = new pg.Client({ connectionString: source! });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [0x4c53_424b]);
      const result = await runCli(['backup', 'create'], { env: { LICENSE_DATABASE_URL: source!, LICENSE_BACKUP_PATH: path.join(work, 'other-host') }, cwd: work });
      assert.equal(result.code, 5, result.stderr);
      assert.match(result.stderr, /another host is backing up or restoring/);
    } finally {
      await holder.end();
    }
  });
});
