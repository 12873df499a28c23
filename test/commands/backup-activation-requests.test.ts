import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { activationRequestFor } from '../support/activation-request.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { SCHEMA_VERSION } from '../../src/lib/storage/migrations.js';

/**
 * A restore keeps the activation request nonces answered after the backup was made
 * (backup/revocations.ts): a request answered then cannot be altered to name another machine
 * and answered again because the store went back in time; the request itself still is.
 */
forEachEngine('restore keeps the activation requests answered after the backup', (fixture) => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-restore-requests-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('refuses the altered copy as replayed after the restore, and answers the request again', async function () {
    this.timeout(120_000);
    const env = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Air-gapped Works', '--json')).json();
    const license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--json')).json();
    const backup = ok(await cli('backup', 'create', '--json')).json();

    const answered = activationRequestFor(license.key, 'hw2-bench');
    const altered = activationRequestFor(license.key, 'hw2-elsewhere', { nonce: answered.request.nonce, created_at: answered.request.created_at });
    // The same nonce, machine and date with another machine key: the digest of the answered request refuses it.
    const rekeyed = activationRequestFor(license.key, 'hw2-bench', { nonce: answered.request.nonce, created_at: answered.request.created_at });
    writeFileSync(path.join(work, 'answered.txt'), answered.text);
    writeFileSync(path.join(work, 'altered.txt'), altered.text);
    writeFileSync(path.join(work, 'rekeyed.txt'), rekeyed.text);
    const checkout = (request: string) => cli('license', 'checkout', license.id, '--ttl-days', '30', '--request', path.join(work, request), '--out', '-');
    const refusedAs = async (request: string, message: RegExp) => {
      const replayed = await checkout(request);
      assert.equal(replayed.code, 5, `${replayed.stdout}\n${replayed.stderr}`);
      assert.match(replayed.stderr, /ACTIVATION_REQUEST_REPLAYED/);
      assert.match(replayed.stderr, message);
    };
    ok(await checkout('answered.txt'));
    await refusedAs('rekeyed.txt', /already used by a request with other contents/);

    ok(await cli('backup', 'restore', backup.backup_id, '--yes', '--json'));
    await refusedAs('altered.txt', /already used for another hardware ID/);
    await refusedAs('rekeyed.txt', /already used by a request with other contents/);
    ok(await checkout('answered.txt'));
  });
  it('carries the nonces into a backup of schema 13 (no request digests): a copy with another machine key is still refused', async function () {
    this.timeout(120_000);
    const { migrate } = await import('../../src/lib/storage/migrations.js');
    const { createBackup } = await import('../../src/lib/backup/create.js');
    const { resolveConfig } = await import('../../src/lib/config/resolve.js');
    const { openDatabase } = await import('../../src/lib/storage/open.js');
    const { createCustomer } = await import('../../src/lib/customers.js');
    const { createLicense } = await import('../../src/lib/licensing/licenses.js');
    const { ensureSigningKey } = await import('../../src/lib/signing-keys/keys.js');
    const env = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(work, 'old-backups') };
    // The store as release of schema 13 made it, with one license, and its backup.
    const db = await openDatabase(env.LICENSE_DATABASE_URL, { migrate: false });
    let backupFile: string;
    let license: { id: string; key: string };
    try {
      await migrate(db, 13);
      const setup = { actor: 'cli:setup' };
      await ensureSigningKey(db, setup);
      const customer = await createCustomer(db, { name: 'From schema 13' }, setup);
      license = await createLicense(db, { customerId: customer.id, type: 'time_based', validUntil: '2099-12-31', withDecryptionKey: true, binding: 'machine-key' }, setup);
      const config = await resolveConfig({ env, cwd: work });
      const record = await createBackup({ db, config, trigger: 'manual', toolVersion: 'old', context: setup });
      assert.equal(record.schema_version, 13);
      backupFile = path.join(env.LICENSE_BACKUP_PATH, record.file);
    } finally {
      await db.close();
    }
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    const answered = activationRequestFor(license.key, 'hw2-bench');
    const rekeyed = activationRequestFor(license.key, 'hw2-bench', { nonce: answered.request.nonce, created_at: answered.request.created_at });
    writeFileSync(path.join(work, 'old-answered.txt'), answered.text);
    writeFileSync(path.join(work, 'old-rekeyed.txt'), rekeyed.text);
    const checkout = (request: string) => cli('license', 'checkout', license.id, '--ttl-days', '30', '--request', path.join(work, request), '--out', '-');
    ok(await checkout('old-answered.txt'));

    const report = ok(await cli('backup', 'restore', backupFile, '--yes', '--json')).json();
    assert.deepEqual([report.schema_version, report.migrated_to], [13, SCHEMA_VERSION]);
    for (const request of ['old-rekeyed.txt', 'old-answered.txt']) {
      const replayed = await checkout(request);
      assert.equal(replayed.code, 5, `${replayed.stdout}\n${replayed.stderr}`);
      assert.match(replayed.stderr, /recorded without its digest/);
    }
  });
});
