import assert from 'node:assert/strict';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { renewLicense, updateLicense } from '../../../src/lib/licensing/license-changes.js';
import { createLicense, getLicense, type License } from '../../../src/lib/licensing/licenses.js';
import { validateOnline } from '../../../src/lib/licensing/online-validation.js';
import { checkoutLicense } from '../../../src/lib/offline/checkout.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

/**
 * `--valid-until DATE` (and a `valid_until` date over HTTP) means through that day, UTC, and
 * valid_until is exclusive: so the day's last second must still be valid. It used to be stored
 * as 23:59:59 and then excluded, losing that second.
 */
forEachEngine('a valid_until date runs through the last second of that day', (fixture) => {
  let db: Database;
  let customerId: string;
  let time: number;
  const clock = () => new Date(time);
  const operator: OperationContext = { actor: 'cli:operator', clock };
  const online = { actor: 'client:127.0.0.1', clock, issuer: 'licenses.example.com', graceHours: 72 };
  const validity = async (license: License, at: string) => {
    time = Date.parse(at);
    const answer = await validateOnline(db, { license_key: license.key, hardware_id: 'HW-1', version: '1.0.0' }, online);
    return answer.valid ? 'valid' : answer.reason;
  };

  before(async () => {
    time = Date.parse('2027-01-20T10:00:00.000Z');
    db = await fixture.freshDatabase();
    await ensureSigningKey(db, operator);
    customerId = (await createCustomer(db, { name: 'Initech' }, operator)).id;
  });

  it('stores a created license\'s end date as the next day\'s 00:00:00, valid online up to its last second', async () => {
    time = Date.parse('2027-01-20T10:00:00.000Z');
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2027-01-31' }, operator);
    assert.equal(license.valid_until, '2027-02-01T00:00:00.000Z');
    assert.equal(await validity(license, '2027-01-31T23:59:59.000Z'), 'valid');
    assert.equal(await validity(license, '2027-01-31T23:59:59.999Z'), 'valid');
    assert.equal(await validity(license, '2027-02-01T00:00:00.000Z'), 'LICENSE_EXPIRED');
  });

  it('gives a checked-out file the same end by the min() rule, and the file verifies up to the day\'s last second', async () => {
    time = Date.parse('2027-01-20T10:00:00.000Z');
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2027-01-31' }, operator);
    const file = await checkoutLicense(db, license.id, { ttlDays: 30 }, { ...operator, issuer: 'licenses.example.com' });
    assert.equal(file.valid_until, '2027-02-01T00:00:00.000Z', 'min(issued_at + 30 days, the license\'s end)');
    const publicKey = (await ensureSigningKey(db, operator)).public_key_pem;
    assert.equal(verifyLicenseFile(file.license_file, { publicKey, now: new Date('2027-01-31T23:59:59Z') }).payload.valid_until, '2027-02-01T00:00:00Z');
    assert.throws(() => verifyLicenseFile(file.license_file, { publicKey, now: new Date('2027-02-01T00:00:00Z') }), { code: 'LICENSE_EXPIRED' });
  });

  it('does the same for update and renew --until; renew --by extends the end it finds', async () => {
    time = Date.parse('2027-01-20T10:00:00.000Z');
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2027-01-31' }, operator);
    assert.equal((await updateLicense(db, license.id, { validUntil: '2027-03-31' }, operator)).license.valid_until, '2027-04-01T00:00:00.000Z');
    assert.equal((await renewLicense(db, license.id, { until: '2027-06-30' }, operator)).license.valid_until, '2027-07-01T00:00:00.000Z');
    assert.equal(await validity(license, '2027-06-30T23:59:59.000Z'), 'valid');
    assert.equal((await renewLicense(db, license.id, { by: '1d' }, operator)).license.valid_until, '2027-07-02T00:00:00.000Z');
    // A timestamp is taken as given.
    time = Date.parse('2027-01-20T10:00:00.000Z');
    assert.equal((await updateLicense(db, license.id, { validUntil: '2027-08-01T12:00:00Z' }, operator)).license.valid_until, '2027-08-01T12:00:00.000Z');
  });

  it('leaves a license stored before the change as it is: its 23:59:59 end stays, and renew --by extends from it', async () => {
    time = Date.parse('2027-01-20T10:00:00.000Z');
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2027-01-31' }, operator);
    await db.execute('UPDATE licenses SET valid_until = ? WHERE id = ?', ['2027-01-31T23:59:59.000Z', license.id]);
    assert.equal((await getLicense(db, license.id)).valid_until, '2027-01-31T23:59:59.000Z');
    assert.equal(await validity(license, '2027-01-31T23:59:58.000Z'), 'valid');
    assert.equal(await validity(license, '2027-01-31T23:59:59.000Z'), 'LICENSE_EXPIRED');
    time = Date.parse('2027-01-20T10:00:00.000Z');
    assert.equal((await renewLicense(db, license.id, { by: '1d' }, operator)).license.valid_until, '2027-02-01T23:59:59.000Z');
  });
});
