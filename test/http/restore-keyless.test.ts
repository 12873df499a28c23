import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createBackup } from '../../src/lib/backup/create.js';
import { resolveConfig } from '../../src/lib/config/resolve.js';
import { createCustomer } from '../../src/lib/customers.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * Stores made before `init` existed could hold data but no signing key (it was made on first
 * use). A daemon that restores such a backup must still be able to sign, as it can after a
 * restart: it makes the key the same way `serve` does at start.
 */
describe('a restore through the daemon of a backup without a signing key', () => {
  let work: string;
  let serve: ServeProcess | undefined;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-keyless-'));
  });
  after(async () => {
    await serve?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('leaves the daemon signing: a new key is made, checkouts work, and the key is served', async () => {
    const backups = path.join(work, 'backups');
    const old = path.join(work, 'old', 'license-server.db');
    const env = { LICENSE_DATABASE_URL: old, LICENSE_BACKUP_PATH: backups };
    const config = await resolveConfig({ env, cwd: work });
    const db = await openDatabase(old);
    let backupId: string;
    let customerId: string;
    try {
      customerId = (await createCustomer(db, { name: 'Keyless Ltd' }, { actor: 'test' })).id;
      assert.equal((await db.query('SELECT 1 FROM signing_keys')).length, 0, 'the fixture has no signing key');
      backupId = (await createBackup({ db, config, trigger: 'manual', toolVersion: 'test', context: { actor: 'test' } })).backup_id;
    } finally {
      await db.close();
    }

    // The restored data has no admin tokens of its own: the bootstrap token from the
    // environment is the one that outlives the restore.
    const token = 'keyless-test-admin-token-0123456789';
    serve = await startServe({ LICENSE_DATABASE_URL: path.join(work, 'live', 'license-server.db'), LICENSE_BACKUP_PATH: backups, LICENSE_ADMIN_TOKEN: token });
    const call = (method: string, route: string, body?: unknown) => api(serve!.url, method, route, { token, ...(body === undefined ? {} : { body }) });
    const before = (await call('GET', '/api/signing-key')).body.public_key_pem;
    // The store being replaced has the key the daemon made at start, which the backup lacks:
    // the backup is another server's for it, and only replace_keys lets it in (issue 35, item 1).
    const refused = await call('POST', `/api/backups/${backupId}/restore`, { confirm: backupId });
    assert.equal(refused.body.error?.code, 'RESTORE_KEYS_NOT_CONFIRMED', refused.text);
    const restored = await call('POST', `/api/backups/${backupId}/restore`, { confirm: backupId, replace_keys: true });
    assert.equal(restored.status, 200, restored.text);

    // A checkout first: nothing else may have made the key on the way.
    const license = await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_from: '2025-01-01', valid_until: '2099-01-01' });
    assert.equal(license.status, 201, license.text);
    const checkout = await call('POST', `/api/licenses/${license.body.id}/checkout`, { ttl_days: 7 });
    assert.equal(checkout.status, 200, checkout.text);
    const key = await call('GET', '/api/signing-key');
    assert.equal(key.status, 200, key.text);
    assert.match(key.body.public_key_pem, /^-----BEGIN PUBLIC KEY-----/);
    assert.notEqual(key.body.public_key_pem, before, 'the restored data had no key; the old one went with the old data');
  });
});
