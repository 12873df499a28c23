import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';
import { ADMIN_URL, createTestDatabase, dropTestDatabase, onDatabase, requirePostgres } from '../support/postgres.js';

describe('a PostgreSQL restore by a role that may not create a schema', () => {
  let work: string;
  let url: string;
  const role = `license_test_role_${process.pid}`;

  before(async function () {
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-restore-role-'));
    url = await createTestDatabase();
  });
  after(async () => {
    if (url) await dropTestDatabase(url).catch(() => undefined);
    await onDatabase(ADMIN_URL, (client) => client.query(`DROP ROLE IF EXISTS ${role}`)).catch(() => undefined);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('is refused with a clear error and a hint, and the data stays as it was', async () => {
    const env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    ok(await runCli(['init'], { env, cwd: work }));
    ok(await runCli(['customer', 'create', '--name', 'Kept'], { env, cwd: work }));
    const backupId = ok(await runCli(['backup', 'create', '--json'], { env, cwd: work })).json<{ backup_id: string }>().backup_id;
    ok(await runCli(['customer', 'create', '--name', 'After'], { env, cwd: work }));
    // The role owns the tables (it may drop and replace them) but not the database.
    await onDatabase(url, async (client) => {
      await client.query(`CREATE ROLE ${role} LOGIN`);
      await client.query(`ALTER SCHEMA public OWNER TO ${role}`);
      const { rows } = await client.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'");
      for (const { name } of rows) await client.query(`ALTER TABLE ${name} OWNER TO ${role}`);
    });
    const asRole = new URL(url);
    asRole.username = role;
    const result = await runCli(['backup', 'restore', backupId, '--yes'], { env: { ...env, LICENSE_DATABASE_URL: asRole.toString() }, cwd: work });
    assert.equal(result.code, 7, result.stdout + result.stderr);
    assert.match(result.stderr, /may not create a schema in this database.*\(DATABASE_UNAVAILABLE\)/);
    assert.match(result.stderr, /GRANT CREATE ON DATABASE/);
    const names = ok(await runCli(['customer', 'list', '--json'], { env, cwd: work })).json<Array<{ name: string }>>().map((row) => row.name).sort();
    assert.deepEqual(names, ['After', 'Kept']);
    // Granted, the same restore goes through.
    await onDatabase(url, (client) => client.query(`GRANT CREATE ON DATABASE ${new URL(url).pathname.slice(1)} TO ${role}`));
    ok(await runCli(['backup', 'restore', backupId, '--yes'], { env: { ...env, LICENSE_DATABASE_URL: asRole.toString() }, cwd: work }));
    const restored = ok(await runCli(['customer', 'list', '--json'], { env, cwd: work })).json<Array<{ name: string }>>().map((row) => row.name);
    assert.deepEqual(restored, ['Kept']);
  });
});
