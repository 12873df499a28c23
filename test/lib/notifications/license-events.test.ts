import assert from 'node:assert/strict';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer, updateCustomer } from '../../../src/lib/customers.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createEntitlement } from '../../../src/lib/licensing/entitlements.js';
import { renewLicense, updateLicense } from '../../../src/lib/licensing/license-changes.js';
import { createLicense, getLicense, setLicenseActive, type License } from '../../../src/lib/licensing/licenses.js';
import { validateOnline } from '../../../src/lib/licensing/online-validation.js';
import { recordUsage } from '../../../src/lib/licensing/usage.js';
import { countMachineRefusal } from '../../../src/lib/notifications/machine-refusals.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import { checkoutLicense } from '../../../src/lib/offline/checkout.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import { rotateSigningKey } from '../../../src/lib/signing-keys/rotation.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';
import { deliveries, everyEventToWebhook, rollingBack } from '../../support/outbox-rows.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const LICENSE_FIELDS = ['license_id', 'customer_id', 'customer_name', 'license_key_prefix', 'valid_until'];

forEachEngine('license events raised with their change (issue 25)', (fixture) => {
  let db: Database;
  let url: string;
  let customerId: string;
  let time: number;
  const clock = () => new Date(time);
  const operator: OperationContext = { actor: 'cli:operator', clock };
  const online = { actor: 'client:127.0.0.1', clock, issuer: 'licenses.example.com', graceHours: 72 };
  const validate = (license: License, hardwareId: string, database: Database = db) =>
    validateOnline(database, { license_key: license.key, hardware_id: hardwareId, version: '1.0.0', machine_name: `box ${hardwareId}` }, online);
  const newLicense = (extra: Partial<Parameters<typeof createLicense>[1]> = {}) =>
    createLicense(db, { customerId, type: 'hybrid', validUntil: '2028-01-01', ...extra }, operator);
  const ofLicense = async (event: string, license: { id: string }) => (await deliveries(db, event)).filter((row) => row.data.license_id === license.id);

  before(async () => {
    time = Date.parse('2026-11-23T10:00:00.000Z');
    url = await fixture.freshUrl();
    db = await openDatabase(url);
    await ensureSigningKey(db, operator);
    customerId = (await createCustomer(db, { name: 'Initech', email: 'billing@initech.example' }, operator)).id;
    await createEntitlement(db, { code: 'api.calls', name: 'API calls' }, operator);
    await everyEventToWebhook(db, ['license.created']);
  });
  after(async () => db?.close());

  it('license.created: the license and customer fields, the key prefix and never the key; email: customer goes to the customer address', async () => {
    const license = await newLicense({ maxMachines: 3, entitlements: [{ code: 'api.calls', usageLimit: 10 }] });
    const [row, ...more] = await ofLicense('license.created', license);
    assert.equal(more.length, 0);
    for (const field of LICENSE_FIELDS) assert.ok(field in row!.data, `data has ${field}`);
    assert.deepEqual(
      { ...row!.data },
      {
        license_id: license.id,
        customer_id: customerId,
        customer_name: 'Initech',
        license_key_prefix: license.key.slice(0, 8),
        valid_until: '2028-01-02T00:00:00.000Z',
        type: 'hybrid',
        valid_from: license.valid_from,
        max_machines: 3,
        entitlements: [{ code: 'api.calls', usage_limit: 10 }],
        actor: 'cli:operator',
      },
    );
    assert.ok(!row!.body.includes(license.key), 'the whole license key is a credential: never in an event');
    const emails = (await deliveries(db, 'license.created', 'email')).filter((email) => email.data.license_id === license.id);
    assert.deepEqual(emails.map((email) => [email.target, email.status, email.event_id]), [['billing@initech.example', 'pending', row!.event_id]]);
  });

  it('email: customer without a contact email is recorded as a failed delivery', async () => {
    const bare = (await createCustomer(db, { name: 'No Mail' }, operator)).id;
    const license = await createLicense(db, { customerId: bare, type: 'time_based', validUntil: '2028-01-01' }, operator);
    const emails = (await deliveries(db, 'license.created', 'email')).filter((email) => email.data.license_id === license.id);
    assert.deepEqual(emails.map((email) => [email.target, email.status]), [['customer', 'failed']]);
    await updateCustomer(db, bare, { email: 'ops@nomail.example' }, operator);
    const second = await createLicense(db, { customerId: bare, type: 'time_based', validUntil: '2028-01-01' }, operator);
    const later = (await deliveries(db, 'license.created', 'email')).filter((email) => email.data.license_id === second.id);
    assert.deepEqual(later.map((email) => [email.target, email.status]), [['ops@nomail.example', 'pending']]);
  });

  it('license.updated with its changes, license.renewed with the previous end, license.deactivated once; nothing for a change that changes nothing', async () => {
    const license = await newLicense();
    await updateLicense(db, license.id, {}, operator);
    await updateLicense(db, license.id, { maxMachines: 5 }, operator);
    const updated = await ofLicense('license.updated', license);
    assert.equal(updated.length, 1);
    assert.deepEqual(updated[0]!.data.changes, { max_machines: { before: null, after: 5 } });
    assert.equal(updated[0]!.data.actor, 'cli:operator');

    await renewLicense(db, license.id, { by: '365d' }, operator);
    const [renewed, ...moreRenewed] = await ofLicense('license.renewed', license);
    assert.equal(moreRenewed.length, 0);
    assert.equal(renewed!.data.previous_valid_until, '2028-01-02T00:00:00.000Z');
    assert.equal(renewed!.data.valid_until, '2029-01-01T00:00:00.000Z');
    assert.equal(renewed!.data.customer_id, customerId);

    await setLicenseActive(db, license.id, false, operator);
    await setLicenseActive(db, license.id, false, operator);
    await setLicenseActive(db, license.id, true, operator);
    const deactivated = await ofLicense('license.deactivated', license);
    assert.equal(deactivated.length, 1, 'a deactivation that changes nothing, and an activation, raise nothing');
    assert.deepEqual(Object.keys(deactivated[0]!.data).sort(), [...LICENSE_FIELDS, 'actor'].sort());
  });

  it('a change whose transaction rolls back leaves no delivery, for every data-change event', async () => {
    const failing = rollingBack(db);
    const license = await newLicense({ maxMachines: 1 });
    const before = (await deliveries(db)).length;
    const rolledBack = (promise: Promise<unknown>) => assert.rejects(promise, /rolled back on purpose/);
    await rolledBack(createLicense(failing, { customerId, type: 'hybrid', validUntil: '2028-01-01' }, operator));
    await rolledBack(updateLicense(failing, license.id, { maxMachines: 2 }, operator));
    await rolledBack(renewLicense(failing, license.id, { by: '30d' }, operator));
    await rolledBack(setLicenseActive(failing, license.id, false, operator));
    await rolledBack(rotateSigningKey(failing, operator));
    await rolledBack(validate(license, 'HW-ROLLBACK', failing));
    assert.equal((await deliveries(db)).length, before);
    assert.equal((await getLicense(db, license.id)).max_machines, 1, 'and the change itself rolled back with it');
  });

  it('machine.activated once per machine, first seen by a validation or a checkout; not on every validation', async () => {
    const license = await newLicense();
    for (let i = 0; i < 3; i += 1) assert.ok((await validate(license, 'HW-1')).valid);
    time += 2 * MINUTE;
    assert.ok((await validate(license, 'HW-1')).valid);
    await checkoutLicense(db, license.id, { ttlDays: 7, hardwareId: 'HW-FILE' }, { ...operator, issuer: 'licenses.example.com' });
    await checkoutLicense(db, license.id, { ttlDays: 7, hardwareId: 'HW-FILE' }, { ...operator, issuer: 'licenses.example.com' });
    const rows = await ofLicense('machine.activated', license);
    assert.deepEqual(rows.map((row) => row.data.hardware_id), ['HW-1', 'HW-FILE']);
    const first = rows[0]!.data;
    assert.equal(first.machine_name, 'box HW-1');
    assert.match(first.machine_id, /^[0-9a-f-]{36}$/);
    assert.equal(first.customer_name, 'Initech');
    assert.equal(first.license_key_prefix, license.key_prefix);
    assert.equal(rows[1]!.data.machine_name, null);
  });

  it('machine.migrated once, when a hw1 machine names its former ID from hw2: the same machine and seat, no machine.activated', async () => {
    const license = await newLicense({ maxMachines: 1 });
    const hw1 = 'hw1-6f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f60718293';
    const hw2 = `hw2-${'ab'.repeat(32)}`;
    const first = await validate(license, hw1);
    assert.ok(first.valid);
    time += 2 * MINUTE;
    const migrate = () =>
      validateOnline(db, { license_key: license.key, hardware_id: hw2, previous_hardware_id: hw1, version: '1.0.0' }, online);
    const moved = await migrate();
    assert.ok(moved.valid, 'the one seat moved with the machine');
    assert.equal(moved.machine_id, first.valid ? first.machine_id : undefined);
    time += 2 * MINUTE;
    assert.ok((await migrate()).valid);
    const rows = await ofLicense('machine.migrated', license);
    assert.equal(rows.length, 1, 'raised by the move only, not by later validations');
    assert.deepEqual({ ...rows[0]!.data }, {
      license_id: license.id,
      customer_id: customerId,
      customer_name: 'Initech',
      license_key_prefix: license.key_prefix,
      valid_until: license.valid_until,
      machine_id: moved.valid ? moved.machine_id : '',
      hardware_id: hw2,
      previous_hardware_id: hw1,
      actor: 'client:127.0.0.1',
    });
    assert.deepEqual((await ofLicense('machine.activated', license)).map((row) => row.data.hardware_id), [hw1]);
  });

  it('signing_key.rotated with the new and the previous key id', async () => {
    const { previous, active } = await rotateSigningKey(db, operator);
    const [row, ...more] = await deliveries(db, 'signing_key.rotated');
    assert.equal(more.length, 0);
    assert.deepEqual({ ...row!.data }, { key_id: active.key_id, previous_key_id: previous.key_id, fingerprint: active.fingerprint, prepared: false, actor: 'cli:operator' });
  });

  it('machine.limit_exceeded: one event for many refusals within an hour, the next after the hour with the refusals since', async () => {
    const license = await newLicense({ maxMachines: 1 });
    assert.ok((await validate(license, 'HW-OK')).valid);
    for (const hardwareId of ['HW-2', 'HW-3']) {
      const answer = await validate(license, hardwareId);
      assert.ok(!answer.valid && answer.reason === 'MACHINE_LIMIT_EXCEEDED', 'the refusal is answered as before');
      time += 10 * MINUTE;
    }
    // A checkout refused for the limit rolls back; its refusal is counted all the same, and its error is unchanged.
    await assert.rejects(
      checkoutLicense(db, license.id, { ttlDays: 7, hardwareId: 'HW-4' }, { ...operator, issuer: 'licenses.example.com' }),
      (error: unknown) => error instanceof LicenseServerError && error.code === 'MACHINE_LIMIT_EXCEEDED',
    );
    let rows = await ofLicense('machine.limit_exceeded', license);
    assert.equal(rows.length, 1);
    assert.deepEqual({ ...rows[0]!.data, license_key_prefix: undefined, valid_until: undefined }, {
      license_id: license.id,
      customer_id: customerId,
      customer_name: 'Initech',
      license_key_prefix: undefined,
      valid_until: undefined,
      max_machines: 1,
      hardware_id: 'HW-2',
      refused_count: 1,
    });
    time += 40 * MINUTE - 1;
    assert.ok(!(await validate(license, 'HW-5')).valid);
    assert.equal((await ofLicense('machine.limit_exceeded', license)).length, 1, 'still within the hour of the first event');
    time += 1;
    assert.ok(!(await validate(license, 'HW-6')).valid);
    rows = await ofLicense('machine.limit_exceeded', license);
    assert.equal(rows.length, 2);
    assert.equal(rows[1]!.data.hardware_id, 'HW-6');
    assert.equal(rows[1]!.data.refused_count, 4, 'HW-3, HW-4 (checkout), HW-5 and HW-6');
    time += HOUR;
    assert.ok(!(await validate(license, 'HW-7')).valid);
    rows = await ofLicense('machine.limit_exceeded', license);
    assert.equal(rows[2]!.data.refused_count, 1);
  });

  it('machine.limit_exceeded: many refusals at once, from several connections, raise one event', async function () {
    this.timeout(30_000);
    const license = await newLicense({ maxMachines: 1 });
    assert.ok((await validate(license, 'HW-OK')).valid);
    const others = await Promise.all([openDatabase(url), openDatabase(url), openDatabase(url)]);
    try {
      const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => validate(license, `HW-RACE-${i}`, others[i % others.length])));
      assert.ok(answers.every((answer) => !answer.valid && answer.reason === 'MACHINE_LIMIT_EXCEEDED'));
      // And the counting alone, at once: the losers of the insert only count.
      await Promise.all(Array.from({ length: 9 }, (_, i) => countMachineRefusal(others[i % others.length]!, { licenseId: license.id, hardwareId: `HW-C-${i}`, maxMachines: 1 }, operator)));
    } finally {
      await Promise.all(others.map((other) => other.close()));
    }
    const rows = await ofLicense('machine.limit_exceeded', license);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.data.refused_count, 1);
    const [mark] = await db.query('SELECT count FROM notification_marks WHERE key = ?', [`machine.limit_exceeded:${license.id}`]);
    assert.equal(Number(mark!.count), 12 - 1 + 9, 'every refusal but the one that raised is counted for the next event');
  });

  it('machine.limit_exceeded: refusals that no rule wants write nothing, not even a mark', async () => {
    const license = await newLicense({ maxMachines: 1 });
    assert.ok((await validate(license, 'HW-OK')).valid);
    await replaceNotificationSettings(db, { rules: [{ event: 'backup.*', email: 'ops@example.com' }] }, operator);
    try {
      for (let i = 0; i < 3; i += 1) {
        const answer = await validate(license, `HW-NO-RULE-${i}`);
        assert.ok(!answer.valid && answer.reason === 'MACHINE_LIMIT_EXCEEDED');
      }
      assert.deepEqual(await db.query('SELECT key FROM notification_marks WHERE key = ?', [`machine.limit_exceeded:${license.id}`]), []);
    } finally {
      await everyEventToWebhook(db, ['license.created']);
    }
  });

  describe('usage.threshold', () => {
    let n = 0;
    const report = (license: License, quantity: number, database: Database = db) => recordUsage(database, {
      license_key: license.key,
      hardware_id: 'HW-U',
      entitlement_code: 'api.calls',
      quantity,
      occurred_at: clock().toISOString(),
      idempotency_key: `report-${(n += 1)}`,
    }, { clock });

    it('80% and 100% once each across reports; a replayed report raises nothing', async () => {
      const license = await newLicense({ entitlements: [{ code: 'api.calls', usageLimit: 10 }] });
      await report(license, 5);
      assert.equal((await ofLicense('usage.threshold', license)).length, 0);
      await report(license, 3);
      await report(license, 1);
      const replay = { license_key: license.key, hardware_id: 'HW-U', entitlement_code: 'api.calls', quantity: 1, occurred_at: clock().toISOString(), idempotency_key: 'same' };
      await recordUsage(db, replay, { clock });
      await recordUsage(db, replay, { clock });
      await assert.rejects(report(license, 1), (error: unknown) => error instanceof LicenseServerError && error.code === 'USAGE_LIMIT_EXCEEDED');
      const rows = await ofLicense('usage.threshold', license);
      // Both on one fake clock: created_at ties, so they are compared in the order of their percent.
      assert.deepEqual(rows.map((row) => [row.data.percent, row.data.used, row.data.usage_limit, row.data.entitlement]).sort((a, b) => Number(a[0]) - Number(b[0])), [[80, 8, 10, 'api.calls'], [100, 10, 10, 'api.calls']]);
      assert.equal(rows[0]!.data.customer_id, customerId);
    });

    it('a report that jumps past 80% to 100% raises 100% alone, and 80% never after', async () => {
      const license = await newLicense({ entitlements: [{ code: 'api.calls', usageLimit: 4 }] });
      await report(license, 1);
      await report(license, 3);
      await updateLicense(db, license.id, { setLimits: [{ code: 'api.calls', usageLimit: 100 }] }, operator);
      await report(license, 80);
      const rows = await ofLicense('usage.threshold', license);
      assert.deepEqual(rows.map((row) => row.data.percent), [100]);
    });

    it('reports at once from several connections raise 80% and 100% once each', async function () {
      this.timeout(30_000);
      const license = await newLicense({ entitlements: [{ code: 'api.calls', usageLimit: 100 }] });
      const others = await Promise.all([openDatabase(url), openDatabase(url), openDatabase(url), openDatabase(url)]);
      try {
        await Promise.all(Array.from({ length: 20 }, (_, i) => report(license, 5, others[i % others.length])));
      } finally {
        await Promise.all(others.map((other) => other.close()));
      }
      const rows = await ofLicense('usage.threshold', license);
      // Reports of 5 pass 80% exactly at 80: the report that made it 80 raised it.
      assert.deepEqual(rows.map((row) => [row.data.percent, row.data.used]).sort((a, b) => a[0] - b[0]), [[80, 80], [100, 100]]);
    });
  });
});
