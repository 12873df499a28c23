import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { createBackup } from '../../../src/lib/backup/create.js';
import { checkRestoredStore } from '../../../src/lib/backup/drill-checks.js';
import { readDrillHistory } from '../../../src/lib/backup/drill-history.js';
import { runDrill } from '../../../src/lib/backup/drill.js';
import { resolveConfig } from '../../../src/lib/config/resolve.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createLicense } from '../../../src/lib/licensing/licenses.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

const operator = { actor: 'cli:ops' };

/** Issue 37, Deliver 4: what a restore drill checks, and that each check can fail. */
forEachEngine('restore drill of the newest backup', (fixture) => {
  let work: string;
  let live: Database;
  let url: string;

  beforeEach(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-drill-'));
    url = await fixture.freshUrl();
    live = await openDatabase(url);
    await ensureSigningKey(live, operator);
    for (const name of ['Acme', 'Globex']) {
      const customer = await createCustomer(live, { name }, operator);
      await createLicense(live, { customerId: customer.id, type: 'time_based', validUntil: '2099-01-01T00:00:00Z' }, operator);
    }
  });
  afterEach(async () => {
    await live.close();
    rmSync(work, { recursive: true, force: true });
  });

  const configFor = (extra: Record<string, string> = {}) =>
    resolveConfig({ cwd: work, env: { LICENSE_DATA_DIR: work, LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: randomKey, ...extra } });
  const randomKey = randomBytes(32).toString('hex');

  it('passes on a backup that holds every write made before it, records the drill, and leaves the live store as it was', async function () {
    this.timeout(60_000);
    const config = await configFor();
    await createBackup({ db: live, config, trigger: 'manual', toolVersion: '0.0.0-test', context: operator });
    const before = await live.query('SELECT count(*) AS n FROM customers');
    const record = await runDrill({ config, live, trigger: 'manual', context: operator, environment: {} });
    assert.equal(record.ok, true, JSON.stringify(record, null, 2));
    const [part] = record.parts;
    assert.equal(part!.source, 'backup');
    assert.deepEqual(part!.checks.map((check) => check.check), ['archive', 'manifest', 'checksums', 'database', 'rows', 'signing keys', 'checkout']);
    assert.match(part!.checks.find((check) => check.check === 'checkout')!.detail, /verifies against the restored and the live keys/);
    assert.deepEqual(await live.query('SELECT count(*) AS n FROM customers'), before, 'the drill\'s own customer and license went into the scratch copy only');
    assert.deepEqual((await readDrillHistory(config.settings.backup.path)).map((drill) => drill.ok), [true]);
  });

  it('fails a backup that is damaged, records it, and raises backup.drill_failed in the live store', async function () {
    this.timeout(60_000);
    const config = await configFor();
    const backup = await createBackup({ db: live, config, trigger: 'manual', toolVersion: '0.0.0-test', context: operator });
    await replaceNotificationSettings(live, { webhooks: [{ name: 'ops', url: 'http://127.0.0.1:9/hook', secret: 'drill-secret-0123456789' }], rules: [{ event: 'backup.drill_failed', webhook: 'ops' }] }, operator);
    const file = path.join(config.settings.backup.path, backup.file);
    const bytes = readFileSync(file);
    const middle = Math.floor(bytes.length / 2);
    bytes.writeUInt8(bytes.readUInt8(middle) ^ 0xff, middle);
    writeFileSync(file, bytes);
    const record = await runDrill({ config, live, trigger: 'scheduled', context: operator, environment: {} });
    assert.equal(record.ok, false);
    assert.equal(record.parts[0]!.error?.code, 'BACKUP_CORRUPT', JSON.stringify(record.parts[0]));
    const [newest] = await readDrillHistory(config.settings.backup.path);
    assert.equal(newest!.ok, false);
    assert.equal(newest!.trigger, 'scheduled');
    const raised = await live.query("SELECT data FROM notification_deliveries WHERE event = 'backup.drill_failed'");
    assert.equal(raised.length, 1);
    assert.match(String(raised[0]!.data), new RegExp(`backup ${backup.backup_id}: backup is damaged`));
  });

  it('fails when the restored store lacks a row the live store made before the moment, or holds another signing key', async function () {
    this.timeout(60_000);
    const config = await configFor();
    // A file of its own for each copy: one copied over another's name could meet the WAL its
    // predecessor's connection left beside it.
    let copies = 0;
    const copy = () => {
      const file = path.join(work, `copy-${(copies += 1)}.db`);
      copyFileSync(database, file);
      return file;
    };
    // The copy is made through a backup of the live store, as a restore would get it.
    const backup = await createBackup({ db: live, config, trigger: 'manual', toolVersion: '0.0.0-test', context: operator });
    const { verifyArchive } = await import('../../../src/lib/backup/archive/verify.js');
    const extracted = path.join(work, 'extracted');
    mkdirSync(extracted);
    const archive = await verifyArchive(path.join(config.settings.backup.path, backup.file), { key: config.settings.backup.encryptionKey, extractTo: extracted });
    const database = archive.files.get('database/sqlite.db') ?? (await convert(archive.files.get('database/postgres.sql')!, work));
    // The backup's moment: its own audit entry comes after it.
    const check = async (file: string) => checkRestoredStore({ file, live, completeThrough: new Date(backup.created_at), issuer: 'drill-test', context: operator });

    assert.deepEqual((await check(copy())).map((result) => result.check), ['rows', 'signing keys', 'checkout']);

    // A clock that crosses a second while the check makes its license: a file starts at its
    // license's valid_from to the second, after a moment the check took before making it.
    let tick = Math.floor(Date.now() / 1000) * 1000 - 100;
    const crossing = { ...operator, clock: () => new Date((tick += 400)) };
    assert.deepEqual((await checkRestoredStore({ file: copy(), live, completeThrough: new Date(backup.created_at), issuer: 'drill-test', context: crossing })).map((result) => result.check), ['rows', 'signing keys', 'checkout']);

    const lacking = copy();
    await withStore(lacking, (db) => db.execute("DELETE FROM licenses WHERE customer_id IN (SELECT id FROM customers WHERE name = 'Globex')"));
    await assert.rejects(check(lacking), (error: LicenseServerError) => {
      assert.equal(error.code, 'RESTORE_DRILL_FAILED');
      assert.match(error.message, /rows made at or before .* are missing from the restored store \(licenses: 1 of the live store's 2\)/);
      return true;
    });

    const rekeyed = copy();
    await withStore(rekeyed, async (db) => {
      await db.execute('UPDATE signing_keys SET public_key = ?', [Buffer.alloc(32, 7)]);
    });
    await assert.rejects(check(rekeyed), /signing key [0-9a-f]+ has another public key in the restored store/);
  });
});

async function withStore(file: string, work: (db: Database) => Promise<unknown>): Promise<void> {
  const db = await openDatabase(file, { create: false });
  try {
    await work(db);
  } finally {
    await db.close();
  }
}

async function convert(dump: string, work: string): Promise<string> {
  const { buildSqliteFromPostgresDump } = await import('../../../src/lib/backup/engines/cross-engine/postgres-to-sqlite.js');
  const file = path.join(work, 'converted.db');
  await buildSqliteFromPostgresDump(dump, file);
  return file;
}
