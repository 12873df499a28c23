import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { ok, runCli } from '../support/cli.js';
import { createTestDatabase, dropTestDatabase, requirePostgres } from '../support/postgres.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const KEY = '5a'.repeat(32);
// The restored data brings its own admin tokens; a token from the environment outlives it.
const TOKEN = 'cross-engine-test-admin-token-0123456789';

/**
 * A store of one engine made with the CLI, with a license checked out to a .lic file and a
 * backup, which is then copied (archive and index) into a daemon's backup directory.
 */
async function sourceWithBackup(work: string, name: string, url?: string) {
  const env = {
    LICENSE_DATA_DIR: path.join(work, name, 'data'),
    LICENSE_DATABASE_URL: url ?? path.join(work, name, 'data', 'license-server.db'),
    LICENSE_BACKUP_PATH: path.join(work, name, 'backups'),
    LICENSE_BACKUP_ENCRYPTION_KEY: KEY,
  };
  ok(await runCli(['init'], { env }));
  const customer = ok(await runCli(['customer', 'create', '--name', `Moved from ${name}`, '--json'], { env })).json();
  const license = ok(await runCli(['license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--metadata', 'crm=ACME-7', '--json'], { env })).json();
  const lic = path.join(work, `${name}.lic`);
  ok(await runCli(['license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'old-machine', '--out', lic], { env }));
  const backup = ok(await runCli(['backup', 'create', '--json'], { env })).json();
  return { env, customer, license, lic: readFileSync(lic), backup };
}

function copyBackup(from: string, to: string, backup: { backup_id: string; file: string }): void {
  mkdirSync(to, { recursive: true, mode: 0o700 });
  copyFileSync(path.join(from, backup.file), path.join(to, backup.file));
  copyFileSync(path.join(from, `${backup.backup_id}.backup.json`), path.join(to, `${backup.backup_id}.backup.json`));
}

/** The restored data is what the daemon serves: the license checks out, the old file verifies. */
async function servesRestored(serve: ServeProcess, source: Awaited<ReturnType<typeof sourceWithBackup>>): Promise<void> {
  const call = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: TOKEN, ...(body === undefined ? {} : { body }) });
  const customers = (await call('GET', '/api/customers')).body;
  assert.deepEqual(customers.map((c: { name: string }) => c.name), [source.customer.name]);
  const license = await call('GET', `/api/licenses/${source.license.id}`);
  assert.equal(license.status, 200, license.text);
  assert.deepEqual(license.body.metadata, { crm: 'ACME-7' });
  const checkout = await call('POST', `/api/licenses/${source.license.id}/checkout`, { ttl_days: 7, hardware_id: 'new-machine' });
  assert.equal(checkout.status, 200, checkout.text);
  const pem = (await call('GET', '/api/signing-key')).body.public_key_pem;
  assert.equal(verifyLicenseFile(Buffer.from(checkout.body.license_file), { publicKey: pem, hardwareId: 'new-machine' }).payload.license_id, source.license.id);
  // Signed before the move, by the key that moved with the data.
  assert.equal(verifyLicenseFile(source.lic, { publicKey: pem, hardwareId: 'old-machine' }).payload.license_id, source.license.id);
  const validated = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: source.license.key, hardware_id: 'new-machine', version: '1' } });
  assert.equal(validated.body.valid, true, validated.text);
}

describe('restoring a backup of the other engine through the daemon', function () {
  this.timeout(120_000);
  let work: string;
  const databases: string[] = [];
  let serve: ServeProcess | undefined;
  before(async function () {
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-http-cross-'));
  });
  afterEach(async () => {
    await serve?.stop();
    serve = undefined;
  });
  after(async () => {
    for (const url of databases) await dropTestDatabase(url);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('a daemon on PostgreSQL restores a SQLite backup: "force" must be a boolean, a foreign table is 409 with the old data served, "force": true moves the data and keeps the table', async () => {
    const source = await sourceWithBackup(work, 'sqlite-source');
    const url = await createTestDatabase();
    databases.push(url);
    const backups = path.join(work, 'pg-daemon-backups');
    serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: backups, LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_ADMIN_TOKEN: TOKEN, LICENSE_CLIENT_RATE_LIMIT: '0' });
    const call = (method: string, route: string, body?: unknown) => api(serve!.url, method, route, { token: TOKEN, ...(body === undefined ? {} : { body }) });
    assert.equal((await call('POST', '/api/customers', { name: 'The daemon\'s own' })).status, 201);
    copyBackup(source.env.LICENSE_BACKUP_PATH, backups, source.backup);
    const id = source.backup.backup_id;
    const listed = (await call('GET', '/api/backups')).body.backups.find((b: { backup_id: string }) => b.backup_id === id);
    assert.equal(listed?.engine, 'sqlite');

    const notBoolean = await call('POST', `/api/backups/${id}/restore`, { confirm: id, force: 'yes' });
    assert.equal(notBoolean.status, 400, notBoolean.text);
    assert.equal(notBoolean.body.error.code, 'INVALID_INPUT');

    let moved: unknown;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("CREATE TABLE invoices (id integer PRIMARY KEY, total numeric NOT NULL); INSERT INTO invoices VALUES (7, 12.00)");
      const refused = await call('POST', `/api/backups/${id}/restore`, { confirm: id });
      assert.equal(refused.status, 409, refused.text);
      assert.equal(refused.body.error.code, 'DATABASE_NOT_EMPTY');
      assert.match(refused.body.error.message, /\(invoices\)/);
      assert.deepEqual((await call('GET', '/api/customers')).body.map((c: { name: string }) => c.name), ['The daemon\'s own'], 'the old data is still served');
      assert.equal((await api(serve.url, 'GET', '/readyz')).status, 200);

      // The daemon made its own key at start: the source's backup is another server's for it (issue 35, item 1).
      const restored = await call('POST', `/api/backups/${id}/restore`, { confirm: id, force: true, replace_keys: true });
      assert.equal(restored.status, 200, restored.text);
      assert.equal(restored.body.engine, 'sqlite');
      assert.equal(restored.body.moved.from, 'sqlite');
      assert.equal(restored.body.moved.to, 'postgres');
      assert.equal(restored.body.moved.rows.customers, 1);
      assert.equal(restored.body.moved.rows.licenses, 1);
      assert.ok(restored.body.moved.rows.signing_keys >= 1);
      assert.ok(restored.body.pre_restore_backup_id, 'the daemon\'s old data was backed up first');
      moved = restored.body.moved;
      assert.deepEqual((await client.query('SELECT id, total FROM invoices')).rows, [{ id: 7, total: '12.00' }], 'the foreign table is left as it was');
    } finally {
      await client.end();
    }
    await servesRestored(serve, source);
    const [audit] = (await call('GET', '/api/audit?action=backup.restored&limit=1')).body;
    assert.deepEqual(audit.details.moved, moved, 'the audit entry records the move');
  });

  it('a daemon on SQLite restores a PostgreSQL backup and serves the moved data', async () => {
    const url = await createTestDatabase();
    databases.push(url);
    const source = await sourceWithBackup(work, 'pg-source', url);
    const backups = path.join(work, 'sqlite-daemon-backups');
    serve = await startServe({ LICENSE_DATABASE_URL: path.join(work, 'sqlite-daemon', 'license-server.db'), LICENSE_BACKUP_PATH: backups, LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_ADMIN_TOKEN: TOKEN, LICENSE_CLIENT_RATE_LIMIT: '0' });
    const call = (method: string, route: string, body?: unknown) => api(serve!.url, method, route, { token: TOKEN, ...(body === undefined ? {} : { body }) });
    assert.equal((await call('POST', '/api/customers', { name: 'The daemon\'s own' })).status, 201);
    copyBackup(source.env.LICENSE_BACKUP_PATH, backups, source.backup);
    const id = source.backup.backup_id;

    const restored = await call('POST', `/api/backups/${id}/restore`, { confirm: id, replace_keys: true });
    assert.equal(restored.status, 200, restored.text);
    assert.equal(restored.body.engine, 'postgres');
    assert.deepEqual(Object.keys(restored.body.moved), ['from', 'to', 'rows']);
    assert.equal(restored.body.moved.from, 'postgres');
    assert.equal(restored.body.moved.to, 'sqlite');
    assert.equal(restored.body.moved.rows.customers, 1);
    assert.equal(restored.body.moved.rows.licenses, 1);
    const pre = (await call('GET', '/api/backups')).body.backups.find((b: { backup_id: string }) => b.backup_id === restored.body.pre_restore_backup_id);
    assert.equal(pre?.engine, 'sqlite', 'the daemon\'s old data was backed up first, on its own engine');
    await servesRestored(serve, source);
  });
});
