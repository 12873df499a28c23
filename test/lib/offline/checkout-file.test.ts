import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { listAudit } from '../../../src/lib/audit.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createLicense, type License } from '../../../src/lib/licensing/licenses.js';
import { admitMachine, countSeats, listMachines, MACHINE_COLUMNS, releaseLostFiles, type Machine } from '../../../src/lib/licensing/machines.js';
import { validateOnline } from '../../../src/lib/licensing/online-validation.js';
import { checkoutToFile, voidCheckout } from '../../../src/lib/offline/checkout-file.js';
import { recordCheckout } from '../../../src/lib/offline/checkout.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import { retireSigningKey, rotateSigningKey } from '../../../src/lib/signing-keys/rotation.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import { forEachEngine } from '../../support/engines.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Checkouts whose file was not written, and files declared lost: what holds a seat after them. */
forEachEngine('voided checkouts and lost files', (fixture) => {
  let db: Database;
  let url: string;
  let dir: string;
  let customerId: string;
  let time = Date.parse('2026-11-23T10:00:00.000Z');
  const clock = () => new Date(time);
  const context = { actor: 'cli:operator', clock, issuer: 'licenses.example.com' };
  const online = { actor: 'client:127.0.0.1', clock, issuer: 'licenses.example.com', graceHours: 72 };
  const nowhere = () => ({ path: path.join(dir, 'no-such-dir', 'x.lic'), directory: false, overwrite: false });
  const floating = () => createLicense(db, { customerId, type: 'time_based', validUntil: '2099-01-01', maxMachines: 1, floating: true, leaseHours: 1 }, context);
  const machine = async (license: License, hardwareId: string): Promise<Machine | undefined> =>
    (await listMachines(db, { licenseId: license.id }, clock())).find((m) => m.hardware_id === hardwareId);
  const endOf = (validUntil: string) => new Date(validUntil).toISOString();

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-checkout-file-'));
    url = await fixture.freshUrl();
    db = await openDatabase(url);
    await ensureSigningKey(db, context);
    customerId = (await createCustomer(db, { name: 'Stick & Co' }, context)).id;
  });
  after(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('void a checkout whose file was not written: the machine keeps exactly what its other live files need', async () => {
    const license = await floating();
    const a = await checkoutToFile(db, license.id, { ttlDays: 10, hardwareId: 'AIR' }, { path: dir, directory: true, overwrite: false }, context);
    assert.deepEqual(readdirSync(dir), [a.filename]);
    await assert.rejects(checkoutToFile(db, license.id, { ttlDays: 30, hardwareId: 'AIR' }, nowhere(), context), (error: unknown) => {
      assert.ok(error instanceof LicenseServerError && error.code === 'FILE_WRITE_FAILED', String(error));
      assert.match(error.message, /the checkout was voided and holds no seat$/);
      return true;
    });
    assert.equal((await machine(license, 'AIR'))!.offline_until, endOf(a.valid_until), 'back to the file that exists');

    // Recorded in this order: B (30 days, not written), E (20 days, written); B voided last.
    const b = await recordCheckout(db, license.id, { ttlDays: 30, hardwareId: 'AIR' }, context);
    const e = await recordCheckout(db, license.id, { ttlDays: 20, hardwareId: 'AIR' }, context);
    await voidCheckout(db, b.ticket, 'FILE_WRITE_FAILED', context);
    assert.equal((await machine(license, 'AIR'))!.offline_until, endOf(e.result.valid_until), 'E, written after B was recorded, still holds the seat');

    // Declared lost, then a new file that is not written: nothing holds the seat any more.
    await releaseLostFiles(db, (await machine(license, 'AIR'))!.id, { reason: 'lost' }, context);
    await assert.rejects(checkoutToFile(db, license.id, { ttlDays: 5, hardwareId: 'AIR' }, nowhere(), context), { code: 'FILE_WRITE_FAILED' });
    const air = (await machine(license, 'AIR'))!;
    assert.deepEqual([air.offline_until, air.holds_seat], [null, false], 'files declared lost hold nothing, not even after a void');
    const voids = await listAudit(db, { action: 'license.checkout_voided', entityId: license.id });
    assert.equal(voids.length, 3);
    assert.deepEqual(voids.map((entry) => entry.details.machine_removed), [null, null, null], 'a machine that had files before is kept');
  });

  it('retire the signing key of a checkout that was voided without --force', async () => {
    const license = await floating();
    const signer = (await rotateSigningKey(db, context)).active;
    await assert.rejects(checkoutToFile(db, license.id, { ttlDays: 365, hardwareId: 'TYPO' }, nowhere(), context), { code: 'FILE_WRITE_FAILED' });
    assert.equal(await machine(license, 'TYPO'), undefined, 'the machine the checkout recorded is gone');
    await rotateSigningKey(db, context);
    // Past the grace tokens it may have signed: only the voided file is left, and it was never written.
    time += 73 * HOUR;
    const retired = await retireSigningKey(db, signer.key_id, { graceHours: 72, databaseUrl: url }, context);
    assert.deepEqual([retired.forced, retired.state], [false, 'retired']);
  });

  it('never write back a seat held by files declared lost after a validation read the machine', async () => {
    const license = await floating();
    await checkoutToFile(db, license.id, { ttlDays: 10, hardwareId: 'LOST' }, { path: dir, directory: true, overwrite: true }, context);
    time += 62_000;
    const [read] = await db.query(
      `SELECT ${MACHINE_COLUMNS.map((column) => `m.${column}`).join(', ')}, l.floating FROM machines m JOIN licenses l ON l.id = m.license_id WHERE m.license_id = ? AND m.hardware_id = ?`,
      [license.id, 'LOST'],
    );
    await releaseLostFiles(db, (await machine(license, 'LOST'))!.id, {}, context);
    assert.equal((await validateOnline(db, { license_key: license.key, hardware_id: 'OTHER', version: '1' }, online)).valid, true);
    const late = await db.transaction((tx) =>
      admitMachine(tx, db.engine, license, { hardwareId: 'LOST', clientVersion: '1', leaseUntil: new Date(time + HOUR) }, online, { row: read!, decryptionKey: null }));
    assert.deepEqual(late.admitted ? 'admitted' : late.reason, 'MACHINE_LIMIT_EXCEEDED');
    assert.equal(await countSeats(db, license, clock()), 1);
  });
});
