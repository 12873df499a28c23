import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { authenticateAdminToken } from '../../src/lib/admin-tokens.js';
import { ensureSigningKey } from '../../src/lib/signing-keys/keys.js';
import { SCHEMA_VERSION } from '../../src/lib/storage/migrations.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { killedAfter, ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { faultSeed, measuredSpan, spreadOver } from '../support/kill-moments.js';
import { oldSchemaStore } from '../support/old-schema-store.js';
import { prng } from '../support/prng.js';
import { api, startServe } from '../support/serve.js';

/**
 * A restore never re-enables a credential revoked after the backup was made: admin tokens
 * revoked in the replaced database stay revoked, always; licenses and customers deactivated
 * there stay deactivated unless the operator says otherwise (--no-keep-revocations).
 */
forEachEngine('restore keeps revocations made after the backup', (fixture) => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-revocations-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  async function store(name: string) {
    const url = await fixture.freshUrl();
    await (await openDatabase(url)).close();
    const env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, name, 'backups') };
    const cli = (args: string[]) => runCli(args, { env, cwd: work });
    const accepts = async (token: string) => {
      const db = await openDatabase(url);
      try {
        return (await authenticateAdminToken(db, token)) !== null;
      } finally {
        await db.close();
      }
    };
    return { url, env, cli, accepts };
  }

  async function licensed(cli: (args: string[]) => ReturnType<typeof runCli>) {
    const customer = ok(await cli(['customer', 'create', '--name', 'Gone Rogue Ltd', '--json'])).json();
    const license = ok(await cli(['license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-01-01', '--json'])).json();
    return { customer, license };
  }

  it('keeps an admin token revoked after the backup revoked: restore, then the token is refused by the token check and by a running serve', async () => {
    const { env, cli, accepts } = await store('tokens');
    const leaked = ok(await cli(['token', 'create', '--name', 'leaked', '--json'])).json();
    const kept = ok(await cli(['token', 'create', '--name', 'kept', '--json'])).json();
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    const revoked = ok(await cli(['token', 'revoke', 'leaked', '--json'])).json();
    assert.equal(await accepts(leaked.token), false);

    const report = ok(await cli(['backup', 'restore', backup.backup_id, '--yes', '--json'])).json();
    assert.equal(await accepts(leaked.token), false, 'the revoked token stays revoked');
    assert.equal(await accepts(kept.token), true, 'a token live then and now still works');
    assert.deepEqual(report.revocations.admin_tokens, [{ id: leaked.id, name: 'leaked', prefix: leaked.prefix, revoked_at: revoked.revoked_at }]);
    const tokens = ok(await cli(['token', 'list', '--all', '--json'])).json();
    assert.equal(tokens.find((t: { id: string }) => t.id === leaked.id).revoked_at, revoked.revoked_at, 'with its original revocation time');

    const text = ok(await cli(['backup', 'restore', backup.backup_id, '--yes']));
    assert.match(text.stdout, new RegExp(`kept revoked: admin token "leaked" \\(${leaked.prefix}\\)`));

    const serve = await startServe({ ...env });
    try {
      assert.equal((await api(serve.url, 'GET', '/api/backups', { token: leaked.token })).status, 401, 'a running daemon refuses it');
      assert.equal((await api(serve.url, 'GET', '/api/backups', { token: kept.token })).status, 200);
    } finally {
      await serve.stop();
    }
    const audit = ok(await cli(['audit', 'list', '--action', 'backup.restored', '--json'])).json();
    assert.deepEqual(audit[0].details.revocations.admin_tokens.map((t: { name: string }) => t.name), ['leaked']);
  });

  it('keeps licenses and customers deactivated after the backup deactivated, lists them, and audits it', async () => {
    const { cli } = await store('licenses');
    const { customer, license } = await licensed(cli);
    const other = await licensed(cli);
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    ok(await cli(['license', 'deactivate', license.id]));
    ok(await cli(['customer', 'deactivate', customer.id]));

    const report = ok(await cli(['backup', 'restore', backup.backup_id, '--yes', '--json'])).json();
    assert.equal(ok(await cli(['license', 'show', license.id, '--json'])).json().active, false);
    assert.equal(ok(await cli(['customer', 'show', customer.id, '--json'])).json().active, false);
    assert.equal(report.revocations.keep, true);
    assert.deepEqual(report.revocations.licenses, [{ id: license.id, key_prefix: license.key_prefix }]);
    assert.deepEqual(report.revocations.customers, [{ id: customer.id, name: 'Gone Rogue Ltd' }]);
    assert.equal(ok(await cli(['license', 'show', other.license.id, '--json'])).json().active, true, 'others as in the backup');
    const refused = await cli(['license', 'checkout', license.id, '--ttl-days', '30', '--out', '-']);
    assert.notEqual(refused.code, 0, 'no checkout of the deactivated license');
    const audit = ok(await cli(['audit', 'list', '--action', 'backup.restored', '--json'])).json();
    assert.deepEqual(audit[0].details.revocations.licenses, [{ id: license.id, key_prefix: license.key_prefix }]);
    assert.deepEqual(audit[0].details.revocations.customers, [{ id: customer.id, name: 'Gone Rogue Ltd' }]);

    const text = ok(await cli(['backup', 'restore', backup.backup_id, '--yes']));
    assert.match(text.stdout, new RegExp(`kept deactivated: license ${license.id} \\(${license.key_prefix}\\)`));
    assert.match(text.stdout, new RegExp(`kept deactivated: customer ${customer.id} \\(Gone Rogue Ltd\\)`));
  });

  it('restores licenses and customers as the backup has them with --no-keep-revocations, but never a revoked token', async () => {
    const { cli, accepts } = await store('opt-out');
    const { customer, license } = await licensed(cli);
    const leaked = ok(await cli(['token', 'create', '--name', 'leaked', '--json'])).json();
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    ok(await cli(['license', 'deactivate', license.id]));
    ok(await cli(['customer', 'deactivate', customer.id]));
    ok(await cli(['token', 'revoke', 'leaked']));

    const report = ok(await cli(['backup', 'restore', backup.backup_id, '--yes', '--no-keep-revocations', '--json'])).json();
    assert.equal(report.revocations.keep, false);
    assert.deepEqual(report.revocations.licenses, [{ id: license.id, key_prefix: license.key_prefix }]);
    assert.deepEqual(report.revocations.customers, [{ id: customer.id, name: 'Gone Rogue Ltd' }]);
    assert.equal(ok(await cli(['license', 'show', license.id, '--json'])).json().active, true, 'active again, as in the backup');
    assert.equal(ok(await cli(['customer', 'show', customer.id, '--json'])).json().active, true);
    assert.equal(await accepts(leaked.token), false, 'the token stays revoked regardless');
    assert.deepEqual(report.revocations.admin_tokens.map((t: { name: string }) => t.name), ['leaked']);
  });

  it('keeps machines deactivated after the backup deactivated, also one first seen after it, unless --no-keep-revocations', async () => {
    const { cli, url } = await store('machines');
    const db = await openDatabase(url);
    try {
      await ensureSigningKey(db, { actor: 'cli:test' }); // checkouts sign
    } finally {
      await db.close();
    }
    const customer = ok(await cli(['customer', 'create', '--name', 'Seats Ltd', '--json'])).json();
    const license = ok(await cli(['license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-01-01', '--max-machines', '2', '--json'])).json();
    const checkout = (host: string) => cli(['license', 'checkout', license.id, '--ttl-days', '1', '--hardware-id', host, '--out', path.join(work, `${host}-${randomUUID()}.lic`)]);
    ok(await checkout('OLD-HOST'));
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    ok(await checkout('NEW-HOST'));
    const machines = ok(await cli(['machine', 'list', '--license', license.id, '--json'])).json();
    for (const machine of machines) ok(await cli(['machine', 'deactivate', machine.id]));
    const byHost = (list: Array<{ hardware_id: string; active: boolean }>) => Object.fromEntries(list.map((m) => [m.hardware_id, m.active]));

    const kept = ok(await cli(['backup', 'restore', backup.backup_id, '--yes', '--json'])).json();
    assert.deepEqual(kept.revocations.machines.map((m: { hardware_id: string }) => m.hardware_id).sort(), ['NEW-HOST', 'OLD-HOST']);
    assert.deepEqual(byHost(ok(await cli(['machine', 'list', '--license', license.id, '--json'])).json()), { 'OLD-HOST': false, 'NEW-HOST': false });
    const again = await checkout('NEW-HOST');
    assert.equal(again.code, 6, again.stderr);
    assert.match(again.stderr, /MACHINE_DEACTIVATED/, 'a machine first seen after the backup does not come back as new');

    const optedOut = ok(await cli(['backup', 'restore', backup.backup_id, '--yes', '--no-keep-revocations', '--json'])).json();
    assert.equal(optedOut.revocations.keep, false);
    assert.deepEqual(byHost(ok(await cli(['machine', 'list', '--license', license.id, '--json'])).json()), { 'OLD-HOST': true }, 'as the backup has them');
  });

  // machines.machine_key came with schema 13: the carry copies a machine into a restored
  // database of schema 4 to 12 with the columns that database has (migrated after the swap).
  for (const version of [4, 12]) {
    it(`carries a machine deactivated after a backup of schema ${version} into it, though that schema has no machine keys`, async () => {
      const url = await fixture.freshUrl();
      const env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, `v${version}`, 'backups') };
      const cli = (args: string[]) => runCli(args, { env, cwd: work });
      const { licenseId, backupFile } = await oldSchemaStore(url, version, { backupPath: env.LICENSE_BACKUP_PATH, cwd: work });
      // Today's release runs on the store (migrating it), and an operator shuts a new machine out.
      const checkout = (host: string) => cli(['license', 'checkout', licenseId, '--ttl-days', '1', '--hardware-id', host, '--out', path.join(work, `${host}-${randomUUID()}.lic`)]);
      ok(await checkout('NEW-HOST'));
      const [machine] = ok(await cli(['machine', 'list', '--license', licenseId, '--json'])).json();
      ok(await cli(['machine', 'deactivate', machine.id]));

      const report = ok(await cli(['backup', 'restore', backupFile, '--yes', '--json'])).json();
      assert.deepEqual([report.schema_version, report.migrated_to], [version, SCHEMA_VERSION]);
      assert.deepEqual(report.revocations.machines, [{ id: machine.id, license_id: licenseId, hardware_id: 'NEW-HOST' }]);
      const after = ok(await cli(['machine', 'list', '--license', licenseId, '--json'])).json();
      assert.deepEqual(after.map((m: { id: string; active: boolean }) => [m.id, m.active]), [[machine.id, false]]);
      const again = await checkout('NEW-HOST');
      assert.equal(again.code, 6, again.stderr);
      assert.match(again.stderr, /MACHINE_DEACTIVATED/);
    });
  }

  it('reads the machines of a replaced store still at schema 12 (not yet migrated by this release) without their machine keys', async () => {
    const url = await fixture.freshUrl();
    const env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'unmigrated', 'backups') };
    const cli = (args: string[]) => runCli(args, { env, cwd: work });
    const machineId = randomUUID();
    const { licenseId, backupFile } = await oldSchemaStore(url, 12, {
      backupPath: env.LICENSE_BACKUP_PATH,
      cwd: work,
      // Deactivated after the backup, by the old release: the store is left at schema 12.
      keep: async (db, store) => {
        const at = new Date().toISOString();
        await db.execute('INSERT INTO machines (id, license_id, hardware_id, name, client_version, active, first_seen, last_seen, deactivated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', [
          machineId, store.licenseId, 'OLD-RELEASE-HOST', null, null, false, at, at, at,
        ]);
      },
    });

    const report = ok(await cli(['backup', 'restore', backupFile, '--yes', '--json'])).json();
    assert.deepEqual([report.schema_version, report.migrated_to], [12, SCHEMA_VERSION]);
    assert.deepEqual(report.revocations.machines, [{ id: machineId, license_id: licenseId, hardware_id: 'OLD-RELEASE-HOST' }]);
    const after = ok(await cli(['machine', 'list', '--license', licenseId, '--json'])).json();
    assert.deepEqual(after.map((m: { id: string; active: boolean }) => [m.id, m.active]), [[machineId, false]]);
  });

  it('never lets a revoked token work, not even when the restore is killed at a random moment', async () => {
    const { url, env, cli, accepts } = await store('killed');
    const db = await openDatabase(url);
    try {
      // Enough rows for a restore to take a while, so that kills land in every phase.
      await db.transaction(async (tx) => {
        for (let i = 0; i < 3000; i += 1) {
          await tx.execute('INSERT INTO customers (id, name, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?)', [randomUUID(), randomBytes(60).toString('base64'), true, new Date().toISOString(), new Date().toISOString()]);
        }
      });
    } finally {
      await db.close();
    }
    const leaked = ok(await cli(['token', 'create', '--name', 'leaked', '--json'])).json();
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    ok(await cli(['token', 'revoke', 'leaked']));
    const span = await measuredSpan(async () => ok(await cli(['backup', 'restore', backup.backup_id, '--yes'])), 1);
    assert.equal(await accepts(leaked.token), false, 'after an unkilled restore the revoked token works');
    for (const [i, delay] of spreadOver(span, 12, prng(faultSeed())).entries()) {
      await killedAfter(['backup', 'restore', backup.backup_id, '--yes'], env, delay);
      assert.equal(await accepts(leaked.token), false, `after kill ${i} (${delay} ms of a ${span} ms restore) the revoked token works`);
    }
    ok(await cli(['backup', 'restore', backup.backup_id, '--yes']));
    assert.equal(await accepts(leaked.token), false);
  });

  it('keeps revocations in a restore through the daemon (POST /api/backups/{id}/restore), and honours "keep_revocations": false', async () => {
    const url = await fixture.freshUrl();
    const env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'daemon', 'backups') };
    const serve = await startServe(env);
    try {
      const admin = serve.token!;
      const call = (method: string, route: string, body?: unknown, token = admin) => api(serve.url, method, route, { token, body });
      const leaked = ok(await runCli(['token', 'create', '--name', 'leaked', '--json'], { env, cwd: work })).json();
      const customer = (await call('POST', '/api/customers', { name: 'Gone Rogue Ltd' })).body;
      const license = (await call('POST', '/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' })).body;
      const backup = (await call('POST', '/api/backups')).body;
      ok(await runCli(['token', 'revoke', 'leaked'], { env, cwd: work }));
      assert.equal((await call('POST', `/api/licenses/${license.id}/deactivate`)).status, 200);

      const restored = await call('POST', `/api/backups/${backup.backup_id}/restore`, { confirm: backup.backup_id });
      assert.equal(restored.status, 200, restored.text);
      assert.equal((await call('GET', '/api/backups', undefined, leaked.token)).status, 401, 'the revoked token is refused after the restore');
      assert.equal((await call('GET', `/api/licenses/${license.id}`)).body.active, false);
      assert.deepEqual(restored.body.revocations.admin_tokens.map((t: { name: string }) => t.name), ['leaked']);
      assert.deepEqual(restored.body.revocations.licenses, [{ id: license.id, key_prefix: license.key_prefix }]);

      const optOut = await call('POST', `/api/backups/${backup.backup_id}/restore`, { confirm: backup.backup_id, keep_revocations: false });
      assert.equal(optOut.status, 200, optOut.text);
      assert.equal(optOut.body.revocations.keep, false);
      assert.equal((await call('GET', `/api/licenses/${license.id}`)).body.active, true);
      assert.equal((await call('GET', '/api/backups', undefined, leaked.token)).status, 401, 'still refused');
      const wrongType = await call('POST', `/api/backups/${backup.backup_id}/restore`, { confirm: backup.backup_id, keep_revocations: 'no' });
      assert.equal(wrongType.status, 400);
      assert.equal(wrongType.body.error.code, 'INVALID_INPUT');
    } finally {
      await serve.stop();
    }
  });
});

