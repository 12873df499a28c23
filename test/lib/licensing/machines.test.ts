import assert from 'node:assert/strict';
import { listAudit } from '../../../src/lib/audit.js';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createEntitlement } from '../../../src/lib/licensing/entitlements.js';
import { renewLicense, updateLicense } from '../../../src/lib/licensing/license-changes.js';
import { createLicense, getLicense, getLicenseDecryptionKey, setLicenseActive, type License } from '../../../src/lib/licensing/licenses.js';
import { admitMachine, countSeats, deactivateMachine, listMachines, MACHINE_COLUMNS, reactivateMachine } from '../../../src/lib/licensing/machines.js';
import { releaseSeat, validateOnline, type ValidationAnswer } from '../../../src/lib/licensing/online-validation.js';
import { recordUsage } from '../../../src/lib/licensing/usage.js';
import { getCustomerSummary, getLicenseView, listUsageRecords } from '../../../src/lib/licensing/usage-view.js';
import { unsealDecryptionKey } from '../../../src/lib/offline/binding.js';
import { checkoutLicense } from '../../../src/lib/offline/checkout.js';
import { verifyGraceToken } from '../../../src/lib/licensing/grace-token.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import { getSigner } from '../../../src/lib/signing-keys/signer.js';
import type { Database, Row } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

async function refused(promise: Promise<unknown>, code: string): Promise<LicenseServerError> {
  let caught: LicenseServerError | undefined;
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, code, error.message);
    caught = error;
    return true;
  });
  return caught!;
}

forEachEngine('machines, seats and license changes', (fixture) => {
  let db: Database;
  let customerId: string;
  let time: number;
  const clock = () => new Date(time);
  const operator: OperationContext = { actor: 'cli:operator', clock };
  const online = { actor: 'client:127.0.0.1', clock, issuer: 'licenses.example.com', graceHours: 72 };
  const validate = (license: License, hardwareId: string, version = '1.0.0'): Promise<ValidationAnswer> =>
    validateOnline(db, { license_key: license.key, hardware_id: hardwareId, version }, online);

  before(async () => {
    time = Date.parse('2026-11-23T10:00:00.000Z');
    db = await fixture.freshDatabase();
    await ensureSigningKey(db, operator);
    customerId = (await createCustomer(db, { name: 'Initech' }, operator)).id;
    await createEntitlement(db, { code: 'api.calls', name: 'API calls' }, operator);
    await createEntitlement(db, { code: 'export', name: 'Export' }, operator);
  });

  const newLicense = (extra: Partial<Parameters<typeof createLicense>[1]> = {}) =>
    createLicense(db, { customerId, type: 'hybrid', validUntil: '2028-01-01', withDecryptionKey: true, ...extra }, operator);

  it('admit machines up to max_machines, then refuse a new hardware ID and seal it no decryption key', async () => {
    const license = await newLicense({ maxMachines: 2 });
    const key = (await getLicenseDecryptionKey(db, license.id))!;
    for (const hardwareId of ['HW-A', 'HW-B']) {
      const answer = await validate(license, hardwareId);
      assert.equal(answer.valid, true, JSON.stringify(answer));
      assert.ok(answer.valid && answer.encrypted_key);
      assert.deepEqual(Buffer.from(unsealDecryptionKey(answer.encrypted_key!, hardwareId, license.id)), key);
    }
    const third = await validate(license, 'HW-C');
    assert.equal(third.valid, false);
    assert.ok(!third.valid && third.reason === 'MACHINE_LIMIT_EXCEEDED', JSON.stringify(third));
    assert.equal('encrypted_key' in third, false, 'a leaked key on a machine over the limit gets no decryption key');
    assert.equal('grace_token' in third, false);
    // Known machines keep validating; the refused one was not recorded.
    assert.equal((await validate(license, 'HW-A')).valid, true);
    const machines = await listMachines(db, { licenseId: license.id }, clock());
    assert.deepEqual(machines.map((m) => m.hardware_id).sort(), ['HW-A', 'HW-B']);
    assert.ok(machines.every((m) => m.active && m.holds_seat && m.client_version === '1.0.0'));
    assert.equal((await getLicense(db, license.id, { seatsAt: clock() })).machines_in_use, 2);
    const audit = await listAudit(db, { action: 'machine.activated' });
    assert.ok(audit.filter((e) => e.details.license_id === license.id).length === 2);
  });

  it('record every machine of a license without a limit, and keep one record per machine', async () => {
    const license = await newLicense();
    await Promise.all(Array.from({ length: 20 }, (_, i) => validate(license, `HW-${i % 5}`)));
    const machines = await listMachines(db, { licenseId: license.id }, clock());
    assert.equal(machines.length, 5);
  });

  it('treat the NFC and NFD forms of a hardware ID as one machine, and refuse bad hardware IDs', async () => {
    const license = await newLicense({ maxMachines: 1 });
    const composed = 'Caf\u00e9-01';
    const decomposed = 'Cafe\u0301-01';
    const first = await validate(license, decomposed);
    assert.ok(first.valid);
    assert.ok((await validate(license, composed)).valid, 'the other form is the same machine, not a second one');
    const [machine] = await listMachines(db, { licenseId: license.id }, clock());
    assert.equal(machine!.hardware_id, composed);
    // The key is sealed for the NFC form, which both spellings normalise to.
    assert.equal(unsealDecryptionKey(first.encrypted_key!, composed, license.id).length, 32);
    for (const bad of ['', 'x'.repeat(257), 'é'.repeat(129), 'tab\there', 'line\nbreak', '\u0085']) {
      await refused(validate(license, bad), 'INVALID_HARDWARE_ID');
    }
    const longest = await validate(license, '\u00e9'.repeat(128));
    assert.ok(!longest.valid && longest.reason === 'MACHINE_LIMIT_EXCEEDED', 'a 256-byte ID is accepted, and refused only for the limit');
  });

  it('deactivate a machine: its validations are refused, its seat is free unless a file or token still holds it', async () => {
    const license = await newLicense({ maxMachines: 1, withDecryptionKey: false });
    const answer = await validate(license, 'HW-1');
    assert.ok(answer.valid);
    const [machine] = await listMachines(db, { licenseId: license.id }, clock());
    const change = await deactivateMachine(db, machine!.id, operator);
    assert.equal(change.machine.active, false);
    assert.match(change.warnings.join('\n'), /seat stays taken until .*grace token/);
    const again = await validate(license, 'HW-1');
    assert.ok(!again.valid && again.reason === 'MACHINE_DEACTIVATED');
    // The grace token it holds is valid for 72 h: the seat stays taken until then.
    assert.ok(!(await validate(license, 'HW-2')).valid);
    time += 72 * HOUR + 1000;
    assert.ok((await validate(license, 'HW-2')).valid, 'the seat is free once the grace token has ended');
    await refused(reactivateMachine(db, machine!.id, operator), 'MACHINE_LIMIT_EXCEEDED');
    assert.deepEqual((await deactivateMachine(db, machine!.id, operator)).warnings, ['the machine was already deactivated; nothing changed']);
  });

  it('hold a seat for a checked-out file until the file ends, and refuse unbound files of a limited license', async () => {
    const license = await newLicense({ maxMachines: 1, withDecryptionKey: false });
    const context = { ...operator, issuer: 'licenses.example.com' };
    await refused(checkoutLicense(db, license.id, { ttlDays: 30 }, context), 'HARDWARE_ID_REQUIRED');
    const file = await checkoutLicense(db, license.id, { ttlDays: 10, hardwareId: 'AIRGAP-1' }, context);
    await refused(checkoutLicense(db, license.id, { ttlDays: 10, hardwareId: 'AIRGAP-2' }, context), 'MACHINE_LIMIT_EXCEEDED');
    const [machine] = await listMachines(db, { licenseId: license.id }, clock());
    assert.equal(machine!.offline_until, file.valid_until);
    await deactivateMachine(db, machine!.id, operator);
    await refused(checkoutLicense(db, license.id, { ttlDays: 10, hardwareId: 'AIRGAP-1' }, context), 'MACHINE_DEACTIVATED');
    assert.ok(!(await validate(license, 'OTHER')).valid, 'the file still holds the seat');
    time += 10 * DAY + 1000;
    assert.ok((await validate(license, 'OTHER')).valid, 'after the file ends the seat is free');
  });

  it('move floating seats between more machines than seats, by lease', async () => {
    const license = await newLicense({ maxMachines: 2, floating: true, leaseHours: 2 });
    const a = await validate(license, 'FLOAT-A');
    assert.ok(a.valid && a.lease_expires_at === new Date(Math.floor(time / 1000) * 1000 + 2 * HOUR).toISOString());
    assert.equal(a.grace_expires_at, a.lease_expires_at, 'on a floating license the grace token is the lease');
    assert.ok((await validate(license, 'FLOAT-B')).valid);
    assert.ok(!(await validate(license, 'FLOAT-C')).valid);
    time += 2 * HOUR + 1000;
    assert.ok((await validate(license, 'FLOAT-C')).valid, 'leases not renewed run out');
    assert.ok((await validate(license, 'FLOAT-D')).valid);
    assert.ok(!(await validate(license, 'FLOAT-A')).valid);
    assert.equal((await listMachines(db, { licenseId: license.id }, clock())).length, 4);
    assert.equal((await getLicense(db, license.id, { seatsAt: clock() })).machines_in_use, 2);
    const notFloating = await newLicense({ maxMachines: 1 });
    assert.deepEqual(await releaseSeat(db, { license_key: notFloating.key, hardware_id: 'X' }, online), {
      released: false, seat_free_at: null, message: 'the license is not floating: a machine keeps its seat until it is deactivated', server_time: clock().toISOString(),
    });
  });

  it('free no seat on release while the grace token given to the machine works offline, and say exactly when it frees', async () => {
    const license = await newLicense({ maxMachines: 1, floating: true, leaseHours: 1 });
    const { publicKey } = await getSigner(db);
    // The reviewer's loop: validate a new machine, release it, again and again.
    const answers: ValidationAnswer[] = [];
    for (let i = 0; i < 10; i += 1) {
      answers.push(await validate(license, `rel-${i}`));
      const released = await releaseSeat(db, { license_key: license.key, hardware_id: `rel-${i}` }, online);
      if (i === 0) {
        assert.ok(answers[0]!.valid);
        assert.deepEqual(released, {
          released: true,
          seat_free_at: answers[0]!.grace_expires_at,
          message: `the seat is free at ${answers[0]!.grace_expires_at}, when the grace token given to this machine ends`,
          server_time: clock().toISOString(),
        });
      }
      time += 60_000;
    }
    const usable = answers.filter((answer) => answer.valid && verifyGraceToken(answer.grace_token, publicKey, { now: clock() }));
    assert.equal(usable.length, 1, 'one seat, one token that works offline');
    assert.ok(answers.slice(1).every((answer) => !answer.valid && answer.reason === 'MACHINE_LIMIT_EXCEEDED' && !('encrypted_key' in answer)));
    // The bound is exact: the seat is free when the token ends, not a second before.
    const freeAt = Date.parse(answers[0]!.valid ? answers[0]!.grace_expires_at : '');
    time = freeAt - 1000;
    assert.ok(verifyGraceToken(answers[0]!.valid ? answers[0]!.grace_token : '', publicKey, { now: clock() }));
    assert.ok(!(await validate(license, 'rel-1')).valid, 'a second before the token ends');
    time = freeAt;
    assert.throws(() => verifyGraceToken(answers[0]!.valid ? answers[0]!.grace_token : '', publicKey, { now: clock() }), { code: 'GRACE_TOKEN_EXPIRED' });
    assert.ok((await validate(license, 'rel-1')).valid, 'the moment it ends');
    // Asked again once its token has ended, the machine has nothing left to give back.
    assert.deepEqual(await releaseSeat(db, { license_key: license.key, hardware_id: 'rel-0' }, online), {
      released: false, seat_free_at: null, message: 'this machine held no lease', server_time: clock().toISOString(),
    });
    // An offline file that outlives the lease holds the seat until the file ends, and the answer says so.
    time += HOUR + 1000;
    const file = await checkoutLicense(db, license.id, { ttlDays: 2, hardwareId: 'rel-file' }, { ...operator, issuer: 'x' });
    assert.ok((await validate(license, 'rel-file')).valid);
    const held = await releaseSeat(db, { license_key: license.key, hardware_id: 'rel-file' }, online);
    assert.deepEqual([held.released, held.seat_free_at], [true, file.valid_until]);
    assert.match(held.message, /offline file checked out for it holds the seat until/);
  });

  /** The machine's row as a validation reads it before deciding (getLicenseWithMachine). */
  const readMachine = async (license: License, hardwareId: string): Promise<Row> =>
    (await db.query(
      `SELECT ${MACHINE_COLUMNS.map((column) => `m.${column}`).join(', ')}, l.floating FROM machines m JOIN licenses l ON l.id = m.license_id
       WHERE m.license_id = ? AND m.hardware_id = ?`,
      [license.id, hardwareId],
    ))[0]!;
  /** A validation that read the machine as `row` and reaches its write only now. */
  const validateFrom = (license: License, hardwareId: string, row: Row) =>
    db.transaction((tx) => admitMachine(tx, db.engine, license, { hardwareId, clientVersion: '1.0.0', leaseUntil: new Date(time + HOUR) }, online, { row, decryptionKey: null }));

  it('never write back a seat that a release freed after a validation read its machine (the stale read of issue 23)', async () => {
    const license = await newLicense({ maxMachines: 1, floating: true, leaseHours: 1, withDecryptionKey: false });
    assert.ok((await validate(license, 'STALE-A')).valid);
    time += 62_000; // past the once-a-minute bookkeeping: the next validation writes the lease
    const read = await readMachine(license, 'STALE-A');
    await releaseSeat(db, { license_key: license.key, hardware_id: 'STALE-A' }, online);
    const other = await validate(license, 'STALE-B');
    const late = await validateFrom(license, 'STALE-A', read);
    const holding = (await listMachines(db, { licenseId: license.id, holdingSeat: true }, clock())).map((m) => m.hardware_id);
    assert.equal(await countSeats(db, license, clock()), 1, `one seat, held by ${holding.join(' and ')}`);
    assert.equal([other.valid, late.admitted].filter(Boolean).length, 1, 'one machine was let in');
  });

  it('never renew the lease of a machine deactivated after a validation read it: it is refused', async () => {
    const license = await newLicense({ maxMachines: 1, withDecryptionKey: false });
    assert.ok((await validate(license, 'STALE-C')).valid);
    time += 62_000;
    const read = await readMachine(license, 'STALE-C');
    const [machine] = await listMachines(db, { licenseId: license.id }, clock());
    await deactivateMachine(db, machine!.id, operator);
    const leaseBefore = (await listMachines(db, { licenseId: license.id }, clock()))[0]!.lease_expires_at;
    const late = await validateFrom(license, 'STALE-C', read);
    assert.deepEqual(late.admitted ? 'admitted' : late.reason, 'MACHINE_DEACTIVATED');
    assert.equal((await listMachines(db, { licenseId: license.id }, clock()))[0]!.lease_expires_at, leaseBefore, 'its seat is held no longer than before');
  });

  it('count usage only from a machine that holds a seat, or from any machine of a license without a limit; never from a deactivated one', async () => {
    const grants = [{ code: 'api.calls', usageLimit: 1000 }];
    const limited = await newLicense({ maxMachines: 1, withDecryptionKey: false, entitlements: grants });
    const floating = await newLicense({ maxMachines: 1, floating: true, leaseHours: 1, withDecryptionKey: false, entitlements: grants });
    const open = await newLicense({ withDecryptionKey: false, entitlements: grants });
    let n = 0;
    const report = (license: License, hardwareId: string, key = `u-${n++}`) =>
      recordUsage(db, { license_key: license.key, hardware_id: hardwareId, entitlement_code: 'api.calls', quantity: 10, occurred_at: clock().toISOString(), idempotency_key: key }, { clock });
    const used = async (license: License) => (await getLicenseView(db, license.id, clock())).entitlements[0]!.used;

    await refused(report(limited, 'NEVER-SEEN'), 'SEAT_REQUIRED');
    assert.ok((await validate(limited, 'SEATED')).valid);
    const counted = await report(limited, 'SEATED', 'seated-1');
    assert.equal(counted.used, 10);
    const over = await validate(limited, 'REFUSED');
    assert.ok(!over.valid && over.reason === 'MACHINE_LIMIT_EXCEEDED');
    await refused(report(limited, 'REFUSED'), 'SEAT_REQUIRED');
    const [seated] = await listMachines(db, { licenseId: limited.id }, clock());
    await deactivateMachine(db, seated!.id, operator);
    await refused(report(limited, 'SEATED'), 'MACHINE_DEACTIVATED');
    assert.equal((await report(limited, 'SEATED', 'seated-1')).replayed, true, 'a report counted before is answered as a replay');
    assert.equal(await used(limited), 10);

    // A floating seat: counted while the lease runs, refused once it has run out.
    assert.ok((await validate(floating, 'FLOATER')).valid);
    assert.equal((await report(floating, 'FLOATER')).used, 10);
    time += HOUR + 1000;
    await refused(report(floating, 'FLOATER'), 'SEAT_REQUIRED');
    assert.equal(await used(floating), 10);

    // No machine limit: any hardware ID counts, but not a machine an operator deactivated.
    assert.equal((await report(open, 'ANYONE')).used, 10);
    assert.ok((await validate(open, 'KNOWN')).valid);
    const known = (await listMachines(db, { licenseId: open.id }, clock())).find((m) => m.hardware_id === 'KNOWN')!;
    await deactivateMachine(db, known.id, operator);
    await refused(report(open, 'KNOWN'), 'MACHINE_DEACTIVATED');
    assert.equal(await used(open), 10);
  });

  it('update a license in place, audited field by field, and warn of machines over a lowered limit', async () => {
    const license = await newLicense({ entitlements: [{ code: 'api.calls', usageLimit: 100 }] });
    for (const id of ['U-1', 'U-2', 'U-3']) assert.ok((await validate(license, id)).valid);
    const change = await updateLicense(db, license.id, {
      validUntil: '2029-06-30',
      maxMachines: 2,
      addEntitlements: [{ code: 'export', usageLimit: null }],
      setLimits: [{ code: 'api.calls', usageLimit: 500 }],
      metadata: { crm_id: 'AC-1042' },
    }, operator);
    assert.equal(change.license.id, license.id);
    assert.equal(change.license.key, license.key);
    assert.equal(change.license.valid_until, '2029-07-01T00:00:00.000Z');
    assert.equal(change.license.max_machines, 2);
    assert.deepEqual(change.license.metadata, { crm_id: 'AC-1042' });
    assert.deepEqual(change.license.entitlements.map((e) => [e.code, e.usage_limit]), [['api.calls', 500], ['export', null]]);
    assert.match(change.warnings[0]!, /3 machines hold a seat, more than the new limit of 2; none is dropped/);
    assert.equal(change.warnings[0]!.split('\n').length, 4, 'the warning lists each machine');
    assert.deepEqual(change.changes.max_machines, { before: null, after: 2 });
    assert.deepEqual(change.changes.valid_until, { before: '2028-01-02T00:00:00.000Z', after: '2029-07-01T00:00:00.000Z' });
    const [entry] = await listAudit(db, { action: 'license.updated', entityId: license.id });
    assert.deepEqual(entry!.details.changes, JSON.parse(JSON.stringify(change.changes)));
    assert.ok((await validate(license, 'U-1')).valid, 'machines already in keep working');
    assert.ok(!(await validate(license, 'U-4')).valid, 'no new machine while over the limit');
    const answer = await validate(license, 'U-2');
    assert.ok(answer.valid && answer.valid_until === '2029-07-01T00:00:00.000Z', 'the next validation sees the change');
    // Nothing changed: no audit entry.
    const again = await updateLicense(db, license.id, { maxMachines: 2, metadata: { crm_id: 'AC-1042' } }, operator);
    assert.deepEqual(again.changes, {});
    assert.equal((await listAudit(db, { action: 'license.updated', entityId: license.id })).length, 1);
    // Empty value removes a key.
    assert.deepEqual((await updateLicense(db, license.id, { metadata: { crm_id: '' } }, operator)).license.metadata, {});
  });

  it('switch a license between node-locked and floating, counting seats by the new terms', async () => {
    const license = await newLicense({ maxMachines: 1, withDecryptionKey: false });
    assert.ok((await validate(license, 'SW-1')).valid);
    const toFloating = await updateLicense(db, license.id, { floating: true, leaseHours: 1 }, operator);
    assert.deepEqual(toFloating.changes.floating, { before: false, after: true });
    assert.equal(toFloating.license.floating, true);
    time += 72 * HOUR + 1000; // SW-1's grace token (72 h, issued while node-locked) has ended
    assert.ok((await validate(license, 'SW-2')).valid, 'on a floating license an idle machine holds no seat');
    time += HOUR + 1000;
    assert.ok((await validate(license, 'SW-1')).valid);
    const back = await updateLicense(db, license.id, { floating: false }, operator);
    assert.match(back.warnings[0]!, /^2 machines hold a seat, more than the limit of 1; none is dropped/);
    const unlimited = await newLicense();
    await refused(updateLicense(db, unlimited.id, { floating: true }, operator), 'INVALID_INPUT');
  });

  it('refuse bad changes with a stable code and change nothing', async () => {
    const license = await newLicense({ entitlements: [{ code: 'api.calls', usageLimit: 10 }] });
    const before = await getLicense(db, license.id);
    const cases: Array<[Parameters<typeof updateLicense>[2], string]> = [
      [{ maxMachines: 0 }, 'INVALID_INPUT'],
      [{ maxMachines: -1 }, 'INVALID_INPUT'],
      [{ maxMachines: 1.5 }, 'INVALID_INPUT'],
      [{ validUntil: '2020-01-01' }, 'INVALID_VALIDITY'],
      [{ validFrom: '2030-01-01' }, 'INVALID_VALIDITY'],
      [{ maxMachines: 3, removeEntitlements: ['export'] }, 'ENTITLEMENT_NOT_FOUND'],
      [{ maxMachines: 3, setLimits: [{ code: 'export', usageLimit: 5 }] }, 'ENTITLEMENT_NOT_FOUND'],
      [{ maxMachines: 3, addEntitlements: [{ code: 'no.such', usageLimit: null }] }, 'ENTITLEMENT_NOT_FOUND'],
      [{ maxMachines: 3, addEntitlements: [{ code: 'api.calls', usageLimit: 1 }] }, 'INVALID_INPUT'],
      [{ maxMachines: 3, metadata: { 'bad key': 'x' } }, 'INVALID_INPUT'],
      [{ leaseHours: 721 }, 'INVALID_INPUT'],
    ];
    for (const [update, code] of cases) await refused(updateLicense(db, license.id, update, operator), code);
    assert.deepEqual(await getLicense(db, license.id), before, 'a refused update changed nothing');
    await refused(updateLicense(db, 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d', { maxMachines: 1 }, operator), 'LICENSE_NOT_FOUND');
  });

  it('renew by a span from the current end, or from now once ended; refuse deactivated licenses and earlier ends', async () => {
    const license = await newLicense({ validUntil: new Date(time + 10 * DAY) });
    const renewed = await renewLicense(db, license.id, { by: '365d' }, operator);
    assert.equal(renewed.license.valid_until, new Date(Date.parse(license.valid_until) + 365 * DAY).toISOString());
    assert.equal(renewed.license.key, license.key);
    const [entry] = await listAudit(db, { action: 'license.renewed', entityId: license.id });
    assert.deepEqual(entry!.details, { changes: { valid_until: { before: license.valid_until, after: renewed.license.valid_until } }, by: '365d' });
    await refused(renewLicense(db, license.id, { until: '2027-01-01' }, operator), 'INVALID_VALIDITY');
    await refused(renewLicense(db, license.id, { by: '0d' }, operator), 'INVALID_INPUT');
    await refused(renewLicense(db, license.id, { by: 'forever' }, operator), 'INVALID_INPUT');

    const lapsed = await newLicense({ validUntil: new Date(time + DAY) });
    time += 3 * DAY;
    const revived = await renewLicense(db, lapsed.id, { by: '30d' }, operator);
    assert.equal(revived.license.valid_until, new Date(Math.floor(time / 1000) * 1000 + 30 * DAY).toISOString(), 'a lapsed license runs the full span from now');

    await setLicenseActive(db, lapsed.id, false, operator);
    await refused(renewLicense(db, lapsed.id, { by: '30d' }, operator), 'LICENSE_INACTIVE');
    assert.equal((await getLicense(db, lapsed.id)).valid_until, revived.license.valid_until);
  });

  it('show usage per entitlement, usage records newest first, recent checkouts, and a customer summed', async () => {
    const customer = await createCustomer(db, { name: 'Summed Ltd' }, operator);
    const grants = [{ code: 'api.calls', usageLimit: 100 }];
    const one = await createLicense(db, { customerId: customer.id, type: 'usage_based', validUntil: '2028-01-01', entitlements: grants }, operator);
    const two = await createLicense(db, { customerId: customer.id, type: 'usage_based', validUntil: '2028-01-01', entitlements: [{ code: 'api.calls', usageLimit: 50 }], maxMachines: 3 }, operator);
    const report = (license: License, quantity: number, key: string) =>
      recordUsage(db, { license_key: license.key, hardware_id: 'M-1', entitlement_code: 'api.calls', quantity, occurred_at: clock().toISOString(), idempotency_key: key }, { clock });
    await report(one, 30, 'k1');
    time += 1000;
    await report(one, 12, 'k2');
    assert.ok((await validate(two, 'M-1')).valid);
    await report(two, 5, 'k3');
    await checkoutLicense(db, two.id, { ttlDays: 5, hardwareId: 'M-2' }, { ...operator, issuer: 'x' });

    const view = await getLicenseView(db, one.id, clock());
    assert.deepEqual(view.entitlements.map((e) => [e.code, e.usage_limit, e.used, e.remaining]), [['api.calls', 100, 42, 58]]);
    const records = await listUsageRecords(db, one.id);
    assert.deepEqual(records.map((r) => [r.idempotency_key, r.quantity, r.remaining]), [['k2', 12, 58], ['k1', 30, 70]]);
    assert.deepEqual((await listUsageRecords(db, one.id, { since: clock() })).map((r) => r.idempotency_key), ['k2']);
    const twoView = await getLicenseView(db, two.id, clock());
    assert.equal(twoView.machines_in_use, 2);
    assert.deepEqual(twoView.recent_checkouts.map((c) => c.hardware_id), ['M-2']);

    const summary = await getCustomerSummary(db, customer.id, clock());
    assert.equal(summary.licenses, 2);
    assert.equal(summary.machines_in_use, 2);
    assert.deepEqual(summary.entitlements, [{ code: 'api.calls', used: 47, usage_limit: 150 }]);
  });
});
