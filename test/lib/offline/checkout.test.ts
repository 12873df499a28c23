import assert from 'node:assert/strict';
import { listAudit } from '../../../src/lib/audit.js';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer, setCustomerActive } from '../../../src/lib/customers.js';
import { createEntitlement } from '../../../src/lib/licensing/entitlements.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createLicense, getLicense, getLicenseDecryptionKey, setLicenseActive, type License } from '../../../src/lib/licensing/licenses.js';
import { checkoutLicense } from '../../../src/lib/offline/checkout.js';
import { decodeLicenseFile } from '../../../src/lib/offline/format.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';
import { publicKeyFromPem } from '../../../src/lib/crypto/ed25519-pem.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import { rotateSigningKey } from '../../../src/lib/signing-keys/rotation.js';
import { cachedSignerKeyId } from '../../../src/lib/signing-keys/signer.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
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
    // The answer's time in the API's one form; the signed payload keeps whole seconds.
    assert.equal(result.valid_until, '2026-12-22T10:00:00.000Z');
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
    assert.equal(result.valid_until, shortLived.valid_until);
    assert.equal(decodeLicenseFile(result.license_file).payload.valid_until, shortLived.valid_until.replace('.000Z', 'Z'));
    const yearLong = await checkoutLicense(db, plain.id, { ttlDays: 365 }, context);
    assert.equal(yearLong.valid_until, '2027-11-22T10:00:00.000Z');
    const oneDay = await checkoutLicense(db, plain.id, { ttlDays: 1 }, context);
    assert.equal(oneDay.valid_until, '2026-11-23T10:00:00.000Z');
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
    assert.match(String(entry.details.checkout_id), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'voidCheckout names the checkout by it');
    assert.deepEqual({ ...entry.details, signing_key_id: 'x', checkout_id: 'x' }, {
      checkout_id: 'x', ttl_days: 7, valid_until: '2026-11-29T10:00:00.000Z', issued_at: '2026-11-22T10:00:00.000Z', hardware_id: 'machine-C', encrypted_key: true, signing_key_id: 'x',
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

forEachEngine('checkout reads', (fixture) => {
  it('puts in the file the entitlements getLicense reads, whatever their names hold, sorted by code', async () => {
    const db = await fixture.freshDatabase();
    await ensureSigningKey(db, setup);
    const customerId = (await createCustomer(db, { name: 'Reads' }, setup)).id;
    const names = { zeta: 'Zeta "quoted" \\ back\\slash', alpha: 'Alpha ✓ 😀 <&>', mid: 'Mid\u2028line' };
    for (const [code, name] of Object.entries(names)) await createEntitlement(db, { code, name }, setup);
    const entitlements = [{ code: 'zeta', usageLimit: 0 }, { code: 'alpha', usageLimit: 9_007_199_254_740_991 }, { code: 'mid', usageLimit: null }];
    const license = await createLicense(db, { customerId, type: 'usage_based', validUntil: '2028-01-01', entitlements }, setup);
    const bare = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01' }, setup);
    const read = (await getLicense(db, license.id)).entitlements.map(({ code, name, usage_limit }) => ({ code, name, usage_limit }));
    assert.deepEqual(read.map((e) => e.code), ['alpha', 'mid', 'zeta']);
    const file = await checkoutLicense(db, license.id, { ttlDays: 30 }, context);
    assert.deepEqual(decodeLicenseFile(file.license_file).payload.entitlements, read);
    assert.deepEqual(decodeLicenseFile((await checkoutLicense(db, bare.key, { ttlDays: 30 }, context)).license_file).payload.entitlements, []);
  });

  it('gives checkouts made at the same moment (signed off the event loop) the same bytes as one made alone', async () => {
    const db = await fixture.freshDatabase();
    const key = await ensureSigningKey(db, setup);
    const customerId = (await createCustomer(db, { name: 'Many at once' }, setup)).id;
    const license = await createLicense(db, { customerId, type: 'hybrid', validUntil: '2028-01-01' }, setup);
    const alone = await checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'machine-M' }, context);
    const together = await Promise.all(Array.from({ length: 24 }, () => checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'machine-M' }, context)));
    for (const result of together) assert.equal(result.license_file, alone.license_file, 'same payload, same key: Ed25519 gives the same file');
    verifyLicenseFile(alone.license_file, { publicKey: publicKeyFromPem(key.public_key_pem), hardwareId: 'machine-M', now: fixedNow });
    assert.equal((await listAudit(db, { action: 'license.checked_out', entityId: license.id, limit: 100 })).length, 25);
  });

  it('on a store without a signing key, says SIGNING_KEY_MISSING before anything about the license', async () => {
    const db = await fixture.freshDatabase();
    const customerId = (await createCustomer(db, { name: 'Keyless' }, setup)).id;
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01' }, setup);
    for (const reference of [license.id, '00000000-0000-4000-8000-000000000000', 'not-a-license']) {
      await refused(checkoutLicense(db, reference, { ttlDays: 30 }, context), 'SIGNING_KEY_MISSING');
    }
    await ensureSigningKey(db, setup);
    await refused(checkoutLicense(db, 'not-a-license', { ttlDays: 30 }, context), 'INVALID_ID');
    await refused(checkoutLicense(db, '00000000-0000-4000-8000-000000000000', { ttlDays: 30 }, context), 'LICENSE_NOT_FOUND');
  });

  it('signs with the key another daemon rotated to at once, and drops the parsed key it held', async () => {
    const url = await fixture.freshUrl();
    // Two handles are two daemons: on PostgreSQL two pools, on SQLite one connection but caches of their own.
    const one = await openDatabase(url);
    const other = await openDatabase(url);
    try {
      const first = await ensureSigningKey(one, setup);
      const customerId = (await createCustomer(one, { name: 'Rotating' }, setup)).id;
      const license = await createLicense(one, { customerId, type: 'hybrid', validUntil: '2028-01-01', withDecryptionKey: true }, setup);
      const before = await checkoutLicense(one, license.id, { ttlDays: 30, hardwareId: 'machine-R' }, context);
      assert.equal(cachedSignerKeyId(one), first.key_id);
      verifyLicenseFile(before.license_file, { publicKey: publicKeyFromPem(first.public_key_pem), hardwareId: 'machine-R', now: fixedNow });

      const { active } = await rotateSigningKey(other, setup);
      const after = await checkoutLicense(one, license.id, { ttlDays: 30, hardwareId: 'machine-R' }, context);
      assert.equal(decodeLicenseFile(after.license_file).payload.key_id, active.key_id);
      verifyLicenseFile(after.license_file, { publicKey: publicKeyFromPem(active.public_key_pem), hardwareId: 'machine-R', now: fixedNow });
      assert.equal(cachedSignerKeyId(one), active.key_id, 'the rotated-away key is no longer held');
      const [audited] = await listAudit(one, { action: 'license.checked_out', limit: 1 });
      assert.equal(audited!.details.signing_key_id, active.key_id);
    } finally {
      await one.close();
      await other.close();
    }
  });
});
