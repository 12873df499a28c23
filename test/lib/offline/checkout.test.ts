import assert from 'node:assert/strict';
import { listAudit } from '../../../src/lib/audit.js';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer, setCustomerActive } from '../../../src/lib/customers.js';
import { createEntitlement } from '../../../src/lib/licensing/entitlements.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createLicense, getLicenseDecryptionKey, setLicenseActive, type License } from '../../../src/lib/licensing/licenses.js';
import { checkoutLicense } from '../../../src/lib/offline/checkout.js';
import { decodeLicenseFile } from '../../../src/lib/offline/format.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';
import { publicKeyFromPem } from '../../../src/lib/crypto/ed25519-pem.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

const DAY = 86_400_000;
const fixedNow = new Date('2026-11-22T10:00:00.600Z');
const context = { actor: 'cli:tester', issuer: 'licenses.example.com', clock: () => fixedNow };
const setup: OperationContext = { actor: 'cli:setup', clock: () => new Date(fixedNow.getTime() - DAY) };

async function refused(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, code, error.message);
    return true;
  });
}

forEachEngine('checkout', (fixture) => {
  let db: Database;
  let publicKey: Uint8Array;
  let customerId: string;
  let plain: License;
  let keyed: License;
  let shortLived: License;

  before(async () => {
    db = await fixture.freshDatabase();
    publicKey = publicKeyFromPem((await ensureSigningKey(db, setup)).public_key_pem);
    customerId = (await createCustomer(db, { name: 'Tyrell "Replicants" & Co <NEXUS> ✓' }, setup)).id;
    await createEntitlement(db, { code: 'seats', name: 'Seats' }, setup);
    await createEntitlement(db, { code: 'export', name: 'Export' }, setup);
    const entitlements = [{ code: 'seats', usageLimit: 10 }, { code: 'export', usageLimit: null }];
    plain = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', entitlements }, setup);
    keyed = await createLicense(db, { customerId, type: 'hybrid', validUntil: '2028-01-01', withDecryptionKey: true }, setup);
    shortLived = await createLicense(db, { customerId, type: 'usage_based', validUntil: new Date(fixedNow.getTime() + 10 * DAY) }, setup);
  });

  it('signs a file valid for ttl_days from now, starting at the license\'s own start, with sorted entitlements', async () => {
    const result = await checkoutLicense(db, plain.key, { ttlDays: 30 }, context);
    assert.equal(result.valid_until, '2026-12-22T10:00:00Z');
    assert.equal(result.filename, `license-${plain.key_prefix}-20261122T100000Z.lic`);
    assert.match(result.license_file, /^[A-Za-z0-9+/]+=*\n$/);
    const { payload } = verifyLicenseFile(result.license_file, { publicKey, now: fixedNow });
    assert.deepEqual(payload, {
      version: 1,
      license_id: plain.id,
      license_key_prefix: plain.key_prefix,
      customer_name: 'Tyrell "Replicants" & Co <NEXUS> ✓',
      license_type: 'time_based',
      valid_from: plain.valid_from.replace('.000Z', 'Z'),
      valid_until: '2026-12-22T10:00:00Z',
      hardware_id: '',
      entitlements: [{ code: 'export', name: 'Export', usage_limit: null }, { code: 'seats', name: 'Seats', usage_limit: 10 }],
      issued_at: '2026-11-22T10:00:00Z',
      issuer: 'licenses.example.com',
    });
  });

  it('never lets the file outlive the license (valid_until = min(now + ttl, license end))', async () => {
    const result = await checkoutLicense(db, shortLived.id, { ttlDays: 365 }, context);
    assert.equal(result.valid_until, shortLived.valid_until.replace('.000Z', 'Z'));
    const yearLong = await checkoutLicense(db, plain.id, { ttlDays: 365 }, context);
    assert.equal(yearLong.valid_until, '2027-11-22T10:00:00Z');
    const oneDay = await checkoutLicense(db, plain.id, { ttlDays: 1 }, context);
    assert.equal(oneDay.valid_until, '2026-11-23T10:00:00Z');
  });

  it('seals the decryption key for the hardware ID, and only that one can open it', async () => {
    const result = await checkoutLicense(db, keyed.id, { ttlDays: 10, hardwareId: 'machine-A' }, context);
    const payload = decodeLicenseFile(result.license_file).payload;
    assert.equal(payload.hardware_id, 'machine-A');
    assert.ok(payload.encrypted_key);
    const verified = verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'machine-A', now: fixedNow });
    assert.deepEqual(Buffer.from(verified.decryptionKey!), await getLicenseDecryptionKey(db, keyed.id));
    assert.throws(() => verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'machine-B', now: fixedNow }), /hardware ID mismatch/);
  });

  it('binds a license without a key when asked, carrying no encrypted_key', async () => {
    const payload = decodeLicenseFile((await checkoutLicense(db, plain.id, { ttlDays: 5, hardwareId: 'machine-A' }, context)).license_file).payload;
    assert.equal(payload.hardware_id, 'machine-A');
    assert.equal(payload.encrypted_key, undefined);
  });

  it('audits every checkout with who, what and when, and no key material', async () => {
    const before = (await listAudit(db, { action: 'license.checked_out', limit: 1000 })).length;
    await checkoutLicense(db, keyed.id, { ttlDays: 7, hardwareId: 'machine-C' }, context);
    const entries = await listAudit(db, { action: 'license.checked_out', limit: 1000 });
    assert.equal(entries.length, before + 1);
    const entry = entries[0]!;
    assert.equal(entry.actor, 'cli:tester');
    assert.equal(entry.entity_id, keyed.id);
    assert.equal(entry.occurred_at, fixedNow.toISOString());
    assert.deepEqual({ ...entry.details, signing_key_id: 'x' }, {
      ttl_days: 7, valid_until: '2026-11-29T10:00:00Z', issued_at: '2026-11-22T10:00:00Z', hardware_id: 'machine-C', encrypted_key: true, signing_key_id: 'x',
    });
    const key = (await getLicenseDecryptionKey(db, keyed.id))!;
    assert.ok(!JSON.stringify(entries).includes(key.toString('hex')) && !JSON.stringify(entries).includes(key.toString('base64')));
  });

  it('refuses bad ttl_days, bad hardware IDs and every rule of spec 4.2, writing nothing', async () => {
    const audited = async () => (await listAudit(db, { action: 'license.checked_out', limit: 10_000 })).length;
    const before = await audited();
    for (const ttlDays of [0, 366, -1, 1.5, '30', undefined, null, Number.NaN]) {
      await refused(checkoutLicense(db, plain.id, { ttlDays }, context), 'INVALID_TTL_DAYS');
    }
    for (const hardwareId of ['', 'x'.repeat(257), 'line\nbreak', 'tab\there', 'nul\u0000', 42, '\ud800']) {
      await refused(checkoutLicense(db, plain.id, { ttlDays: 30, hardwareId }, context), 'INVALID_HARDWARE_ID');
    }
    assert.ok(await checkoutLicense(db, plain.id, { ttlDays: 30, hardwareId: 'x'.repeat(256) }, context));
    await refused(checkoutLicense(db, keyed.id, { ttlDays: 30 }, context), 'HARDWARE_ID_REQUIRED');
    await refused(checkoutLicense(db, 'not-a-license', { ttlDays: 30 }, context), 'INVALID_ID');
    await refused(checkoutLicense(db, '00000000-0000-4000-8000-000000000000', { ttlDays: 30 }, context), 'LICENSE_NOT_FOUND');
    await refused(checkoutLicense(db, plain.id, { ttlDays: 30 }, { ...context, clock: () => new Date('2028-01-02T00:00:00Z') }), 'LICENSE_EXPIRED');

    const future = await createLicense(db, { customerId, type: 'time_based', validFrom: '2027-06-01', validUntil: '2028-01-01' }, setup);
    await refused(checkoutLicense(db, future.id, { ttlDays: 30 }, context), 'LICENSE_NOT_YET_VALID');
    await setLicenseActive(db, plain.id, false, setup);
    await refused(checkoutLicense(db, plain.id, { ttlDays: 30 }, context), 'LICENSE_INACTIVE');
    await setLicenseActive(db, plain.id, true, setup);
    await setCustomerActive(db, customerId, false, setup);
    await refused(checkoutLicense(db, plain.id, { ttlDays: 30 }, context), 'CUSTOMER_INACTIVE');
    await setCustomerActive(db, customerId, true, setup);
    assert.equal(await audited(), before + 1, 'only the one accepted checkout was audited');
    const ahead = await checkoutLicense(db, future.id, { ttlDays: 365 }, context);
    assert.equal(decodeLicenseFile(ahead.license_file).payload.valid_from, '2027-06-01T00:00:00Z', 'a future license gives a file that starts with it');
  });
});
