import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';

/** Restoring a backup onto the other database engine is refused for what it is, not as "too new". */
describe('backup restore across engines', () => {
  let work: string;
  let postgresUrl: string | undefined;
  before(async function () {
    const { requirePostgres, createTestDatabase } = await import('../support/postgres.js');
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-backup-engines-'));
    postgresUrl = await createTestDatabase();
    ok(await runCli(['init'], { env: { LICENSE_DATABASE_URL: postgresUrl }, cwd: work }));
  });
  after(async () => {
    const { dropTestDatabase } = await import('../support/postgres.js');
    if (postgresUrl) await dropTestDatabase(postgresUrl);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const customerNames = async (url: string) => {
    const db = await openDatabase(url);
    try {
      return (await db.query('SELECT name FROM customers')).map((row) => String(row.name));
    } finally {
      await db.close();
    }
  };

  it('names the engine mismatch (BACKUP_ENGINE_MISMATCH) for a SQLite backup onto PostgreSQL, and changes nothing', async () => {
    const sqlite = path.join(work, 'sqlite', 'license-server.db');
    await (await openDatabase(sqlite)).close();
    const env = { LICENSE_DATABASE_URL: sqlite, LICENSE_BACKUP_PATH: path.join(work, 'sqlite-backups') };
    ok(await runCli(['customer', 'create', '--name', 'On SQLite'], { env, cwd: work }));
    const backup = ok(await runCli(['backup', 'create', '--json'], { env, cwd: work })).json();
    const file = path.join(work, 'sqlite-backups', backup.file);
    ok(await runCli(['customer', 'create', '--name', 'Already on PostgreSQL'], { env: { LICENSE_DATABASE_URL: postgresUrl! }, cwd: work }));

    const result = await runCli(['backup', 'restore', file, '--yes'], { env: { LICENSE_DATABASE_URL: postgresUrl!, LICENSE_BACKUP_PATH: path.join(work, 'pg-backups') }, cwd: work });
    assert.equal(result.code, 13, result.stderr);
    assert.match(result.stderr, /^Error: .*backup is of a SQLite database.*database\.url is a PostgreSQL database.*\(BACKUP_ENGINE_MISMATCH\)$/m);
    assert.match(result.stderr, /^Try: .*cross-engine restore is not supported/m);
    assert.doesNotMatch(result.stderr, /as new as/);
    assert.deepEqual(await customerNames(postgresUrl!), ['Already on PostgreSQL'], 'the PostgreSQL database is untouched');
    assert.ok(!existsSync(path.join(work, 'pg-backups')) || ok(await runCli(['backup', 'list', '--json'], { env: { LICENSE_DATABASE_URL: postgresUrl!, LICENSE_BACKUP_PATH: path.join(work, 'pg-backups') }, cwd: work })).json().length === 0, 'no pre-restore backup was taken');

    const json = await runCli(['backup', 'restore', file, '--yes', '--json'], { env: { LICENSE_DATABASE_URL: postgresUrl! }, cwd: work });
    assert.equal(json.code, 13);
    assert.equal(json.json().error.code, 'BACKUP_ENGINE_MISMATCH');
  });

  it('names the engine mismatch for a PostgreSQL backup onto SQLite, and creates no SQLite database', async () => {
    const env = { LICENSE_DATABASE_URL: postgresUrl!, LICENSE_BACKUP_PATH: path.join(work, 'pg-source-backups') };
    const backup = ok(await runCli(['backup', 'create', '--json'], { env, cwd: work })).json();
    const target = path.join(work, 'new-host', 'license-server.db');
    const result = await runCli(['backup', 'restore', path.join(work, 'pg-source-backups', backup.file), '--yes'], {
      env: { LICENSE_DATABASE_URL: target, LICENSE_BACKUP_PATH: path.join(work, 'new-host', 'backups') },
      cwd: work,
    });
    assert.equal(result.code, 13, result.stderr);
    assert.match(result.stderr, /^Error: .*backup is of a PostgreSQL database.*database\.url is a SQLite database.*\(BACKUP_ENGINE_MISMATCH\)$/m);
    assert.match(result.stderr, /^Try: .*cross-engine restore is not supported/m);
    assert.ok(!existsSync(target), 'no database file was made');

    // A PostgreSQL dump is validated by loading it into a scratch PostgreSQL database, which
    // a SQLite host does not have: that is the same mismatch, not an invalid backup.
    const validate = await runCli(['backup', 'validate', path.join(work, 'pg-source-backups', backup.file)], {
      env: { LICENSE_DATABASE_URL: target, LICENSE_BACKUP_PATH: path.join(work, 'new-host', 'backups') },
      cwd: work,
    });
    assert.equal(validate.code, 13, validate.stderr);
    assert.match(validate.stderr, /^Error: .*PostgreSQL.*scratch.*\(BACKUP_ENGINE_MISMATCH\)$/m);
    assert.ok(!existsSync(target), 'no database file was made');
  });
});
