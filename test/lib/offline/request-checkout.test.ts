import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { listAudit } from '../../../src/lib/audit.js';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { updateLicense } from '../../../src/lib/licensing/license-changes.js';
import { createLicense, type License } from '../../../src/lib/licensing/licenses.js';
import { validateOnline } from '../../../src/lib/licensing/online-validation.js';
import type { ActivationRequest } from '../../../src/lib/offline/activation-request.js';
import { checkoutLicense } from '../../../src/lib/offline/checkout.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';
import { publicKeyFromPem } from '../../../src/lib/crypto/ed25519-pem.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { activationRequestFor, uncheckedRequestText } from '../../support/activation-request.js';
import { forEachEngine } from '../../support/engines.js';

const DAY = 86_400_000;
const fixedNow = new Date('2026-11-22T10:00:00.600Z');
const at = (ms: number) => ({ actor: 'cli:tester', issuer: 'licenses.example.com', clock: () => new Date(fixedNow.getTime() + ms) });
const context = at(0);
const setup: OperationContext = { actor: 'cli:setup', clock: () => new Date(fixedNow.getTime() - DAY) };

/** A request made at 09:30, half an hour before the checkouts of `context`. */
function requestFor(licenseKey: string, hardwareId: string, changes: Partial<ActivationRequest> = {}): { text: string; request: ActivationRequest } {
  return activationRequestFor(licenseKey, hardwareId, { created_at: '2026-11-22T09:30:00Z', ...changes });
}

async function refused(promise: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, code, error.message);
    if (message) assert.match(error.message, message);
    return true;
  });
}

forEachEngine('checkout with an activation request', (fixture) => {
  let db: Database;
  let publicKey: Uint8Array;
  let oneSeat: License;
  let keyed: License;
  let other: License;

  before(async () => {
    db = await fixture.freshDatabase();
    publicKey = publicKeyFromPem((await ensureSigningKey(db, setup)).public_key_pem);
    const customerId = (await createCustomer(db, { name: 'Air-gapped Works' }, setup)).id;
    oneSeat = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', maxMachines: 1 }, setup);
    keyed = await createLicense(db, { customerId, type: 'hybrid', validUntil: '2028-01-01', withDecryptionKey: true }, setup);
    other = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01' }, setup);
  });

  after(async () => {
    await db.close();
  });

  it('writes a version 2 file bound to the request\'s machine, carrying its nonce, and counts the machine', async () => {
    const { text, request } = requestFor(oneSeat.key, 'hw2-bench-3');
    const result = await checkoutLicense(db, oneSeat.id, { ttlDays: 30, activationRequest: text }, context);
    const { payload } = verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'hw2-bench-3', now: fixedNow });
    assert.equal(payload.version, 2);
    assert.equal(payload.request_nonce, request.nonce);
    assert.equal(payload.hardware_id, 'hw2-bench-3');
    const machines = await db.query('SELECT hardware_id, name, client_version FROM machines WHERE license_id = ?', [oneSeat.id]);
    assert.deepEqual(machines.map((row) => [row.hardware_id, row.name, row.client_version]), [['hw2-bench-3', 'bench 3', '4.2.0']]);
    const [entry] = await listAudit(db, { action: 'license.checked_out', entityId: oneSeat.id });
    assert.equal(entry!.details.request_nonce, request.nonce);
    assert.equal(entry!.details.hardware_id, 'hw2-bench-3');
    const rows = await db.query('SELECT nonce, license_id, hardware_id FROM activation_requests WHERE nonce = ?', [request.nonce]);
    assert.deepEqual(rows.map((row) => [row.nonce, String(row.license_id), row.hardware_id]), [[request.nonce, oneSeat.id, 'hw2-bench-3']]);

    // The same request again (a USB write that failed): a new file, for the same machine and seat.
    const again = await checkoutLicense(db, oneSeat.id, { ttlDays: 30, activationRequest: text }, at(60_000));
    assert.equal(verifyLicenseFile(again.license_file, { publicKey, hardwareId: 'hw2-bench-3', now: fixedNow }).payload.request_nonce, request.nonce);
    assert.equal(String((await db.query('SELECT count(*) AS n FROM machines WHERE license_id = ?', [oneSeat.id]))[0]!.n), '1');
    // Another machine's request is refused: the one seat is taken.
    await refused(checkoutLicense(db, oneSeat.id, { ttlDays: 30, activationRequest: requestFor(oneSeat.key, 'hw2-bench-4').text }, context), 'MACHINE_LIMIT_EXCEEDED');
  });

  it('seals a license\'s decryption key to the request\'s hardware ID', async () => {
    const { text } = requestFor(keyed.key, 'hw2-keyed');
    const result = await checkoutLicense(db, keyed.key, { ttlDays: 7, activationRequest: text }, context);
    const verified = verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'hw2-keyed', now: fixedNow });
    assert.equal(verified.decryptionKey?.length, 32);
    assert.equal(verified.payload.version, 2);
  });

  it('moves the machine of the request\'s previous_hardware_id (hw1) to its hw2 ID, holding the one seat, as a validation does', async () => {
    const customerId = (await createCustomer(db, { name: 'Moved Machines' }, setup)).id;
    const single = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', maxMachines: 1 }, setup);
    const hw1 = `hw1-${'ab'.repeat(20)}`;
    await checkoutLicense(db, single.id, { ttlDays: 30, hardwareId: hw1 }, context);
    // Without previous_hardware_id the hw2 request is a second machine: refused, the seat is the hw1 one's.
    await refused(checkoutLicense(db, single.id, { ttlDays: 30, activationRequest: requestFor(single.key, 'hw2-moved').text }, context), 'MACHINE_LIMIT_EXCEEDED');
    const { text } = requestFor(single.key, 'hw2-moved', { previous_hardware_id: hw1 });
    const result = await checkoutLicense(db, single.id, { ttlDays: 30, activationRequest: text }, at(60_000));
    assert.equal(verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'hw2-moved', now: fixedNow }).payload.hardware_id, 'hw2-moved');
    const machines = await db.query('SELECT hardware_id FROM machines WHERE license_id = ?', [single.id]);
    assert.deepEqual(machines.map((row) => row.hardware_id), ['hw2-moved']);
    const [moved] = await listAudit(db, { action: 'machine.migrated' });
    assert.equal(moved!.details.previous_hardware_id, hw1);
    assert.equal(moved!.details.license_id, single.id);
  });

  it('records an empty machine_name or app_version as nothing, as section 12 says: null for a new machine, a known machine keeps its own', async () => {
    const doc = readFileSync(new URL('../../../docs/offline-license-format.md', import.meta.url), 'utf8');
    const row = (member: string) => new RegExp(`^\\| \`${member}\` \\|.*$`, 'm').exec(doc)![0];
    assert.match(row('machine_name'), /Recorded as the machine's name; an empty one records nothing: a new machine's name is `null`, a known machine keeps the name it has\. \|$/);
    assert.match(row('app_version'), /Recorded as the machine's client version; an empty one records nothing: a new machine's is `null`, a known machine keeps the one it has\. \|$/);

    const named = async () => (await db.query('SELECT name, client_version FROM machines WHERE license_id = ? AND hardware_id = ?', [other.id, 'hw2-unnamed'])).map((m) => [m.name, m.client_version]);
    await checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: requestFor(other.key, 'hw2-unnamed', { machine_name: '', app_version: '' }).text }, context);
    assert.deepEqual(await named(), [[null, null]]);
    await checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: requestFor(other.key, 'hw2-unnamed', { machine_name: 'bench 9', app_version: '5.0.0' }).text }, at(60_000));
    assert.deepEqual(await named(), [['bench 9', '5.0.0']]);
    await checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: requestFor(other.key, 'hw2-unnamed', { machine_name: '', app_version: '' }).text }, at(120_000));
    assert.deepEqual(await named(), [['bench 9', '5.0.0']], 'a known machine keeps its name and version');
  });

  it('writes version 1, byte for byte as before, for every checkout without a request', async () => {
    const result = await checkoutLicense(db, other.id, { ttlDays: 7, hardwareId: 'hw2-plain' }, context);
    const json = Buffer.from(result.license_file, 'base64').toString('utf8');
    assert.match(json, /"version":1\}$/);
    assert.doesNotMatch(json, /request_nonce/);
  });

  it('refuses a request that is malformed, for another license, too old or from the future, with no trace', async () => {
    const before = (await listAudit(db, { action: 'license.checked_out' })).length;
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: 'hello' }, context), 'ACTIVATION_REQUEST_MALFORMED', /^activation request is malformed: it does not start with the line/);
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: 42 }, context), 'ACTIVATION_REQUEST_MALFORMED', /must be the request file's text, got number/);
    await refused(
      checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: requestFor(oneSeat.key, 'hw2-x').text }, context),
      'ACTIVATION_REQUEST_WRONG_LICENSE',
      new RegExp(`^the activation request is for another license \\(key ${oneSeat.key_prefix}\\.\\.\\.\\), not license ${other.id}$`),
    );
    // The window: 7 days back from the server's time, 5 minutes ahead.
    const old = requestFor(other.key, 'hw2-x', { created_at: '2026-11-15T09:59:59Z' });
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: old.text }, context), 'ACTIVATION_REQUEST_EXPIRED', /made at 2026-11-15T09:59:59Z, more than 7 days ago/);
    const ahead = requestFor(other.key, 'hw2-x', { created_at: '2026-11-22T10:06:00Z' });
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: ahead.text }, context), 'ACTIVATION_REQUEST_EXPIRED', /more than 5 minutes ahead/);
    // A shorter window (offline.request_window_days): a request of yesterday is too old for one day.
    const yesterday = requestFor(other.key, 'hw2-x', { created_at: '2026-11-21T09:59:59Z' });
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: yesterday.text }, { ...context, requestWindowDays: 1 }), 'ACTIVATION_REQUEST_EXPIRED', /more than 1 day ago/);
    const edge = requestFor(other.key, 'hw2-edge', { created_at: '2026-11-22T10:05:00Z' });
    await checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: edge.text }, context);
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, hardwareId: 'hw2-x', activationRequest: edge.text }, context), 'INVALID_INPUT', /not both/);
    assert.equal((await listAudit(db, { action: 'license.checked_out' })).length, before + 1);
    assert.equal(String((await db.query('SELECT count(*) AS n FROM activation_requests WHERE hardware_id = ?', ['hw2-x']))[0]!.n), '0');
  });

  it('refuses a nonce used for another hardware ID or another license (REPLAYED), and only within its window', async () => {
    const first = requestFor(other.key, 'hw2-first');
    await checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: first.text }, context);
    const altered = requestFor(other.key, 'hw2-altered', { nonce: first.request.nonce });
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: altered.text }, context), 'ACTIVATION_REQUEST_REPLAYED', /already used for another hardware ID/);
    const elsewhere = requestFor(keyed.key, 'hw2-first', { nonce: first.request.nonce });
    await refused(checkoutLicense(db, keyed.id, { ttlDays: 7, activationRequest: elsewhere.text }, context), 'ACTIVATION_REQUEST_REPLAYED', /already used for another license/);
    const redated = requestFor(other.key, 'hw2-first', { nonce: first.request.nonce, created_at: '2026-11-22T09:31:00Z' });
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: redated.text }, context), 'ACTIVATION_REQUEST_REPLAYED', /made at another time/);
    // Eight days on, the request is refused by its date, and its row is pruned by the next request's checkout.
    const later = at(8 * DAY);
    await refused(checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: first.text }, later), 'ACTIVATION_REQUEST_EXPIRED');
    await checkoutLicense(db, other.id, { ttlDays: 7, activationRequest: requestFor(other.key, 'hw2-later', { created_at: '2026-11-30T09:00:00Z' }).text }, later);
    assert.deepEqual(await db.query('SELECT nonce FROM activation_requests WHERE nonce = ?', [first.request.nonce]), []);
  });

  it('refuses a nonce reused with another machine_key, or any other member changed (REPLAYED); the machine keeps its key and the request still answers', async () => {
    const customerId = (await createCustomer(db, { name: 'Keyed Works' }, setup)).id;
    const sealed = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', withDecryptionKey: true, binding: 'machine-key' }, setup);
    const genuine = requestFor(sealed.key, 'hw2-machine-c');
    await checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: genuine.text }, context);
    const keyOfC = async () => (await db.query('SELECT machine_key FROM machines WHERE license_id = ?', [sealed.id])).map((row) => row.machine_key);
    assert.deepEqual(await keyOfC(), [genuine.request.machine_key]);
    const attacker = activationRequestFor(sealed.key, 'hw2-machine-c').request.machine_key;
    const same = { nonce: genuine.request.nonce, created_at: genuine.request.created_at };
    for (const change of [{ machine_key: attacker }, { machine_name: 'bench 4' }, { app_version: '4.2.1' }, { previous_hardware_id: `hw1-${'cd'.repeat(20)}` }]) {
      const altered = requestFor(sealed.key, 'hw2-machine-c', { ...same, ...change });
      await refused(
        checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: altered.text }, at(60_000)),
        'ACTIVATION_REQUEST_REPLAYED',
        /^the activation request's nonce \S+ was already used by a request with other contents$/,
      );
    }
    assert.deepEqual(await keyOfC(), [genuine.request.machine_key], 'C\'s recorded key is not replaced');
    // The genuine request again (a USB write that failed) still answers, sealed to C's own key.
    const again = await checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: genuine.text }, at(120_000));
    assert.equal(verifyLicenseFile(again.license_file, { publicKey, hardwareId: 'hw2-machine-c', now: fixedNow, leaveMachineKeySealed: true }).payload.machine_key, genuine.request.machine_key);
  });

  it('refuses a request whose machine_key is an X25519 point of small order (ACTIVATION_REQUEST_MALFORMED, for any binding), recording nothing', async () => {
    const customerId = (await createCustomer(db, { name: 'Small Order Works' }, setup)).id;
    const sealed = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', withDecryptionKey: true, binding: 'machine-key' }, setup);
    const plain = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01' }, setup);
    const p = (1n << 255n) - 19n;
    const littleEndian = (n: bigint) => Buffer.from(n.toString(16).padStart(64, '0'), 'hex').reverse();
    const orderEight = ['e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800', '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157'].map((hex) => Buffer.from(hex, 'hex'));
    const keys = [littleEndian(0n), littleEndian(1n), ...orderEight, littleEndian(p - 1n), littleEndian(p), littleEndian(p + 1n)];
    // RFC 7748 ignores the top bit of the last byte: with it set, the same points.
    const withTopBit = keys.map((key) => Buffer.concat([key.subarray(0, 31), Buffer.of(key[31]! | 0x80)]));
    for (const key of [...keys, ...withTopBit]) {
      for (const license of [sealed, plain]) {
        const text = uncheckedRequestText({ ...requestFor(license.key, 'hw2-small-order').request, machine_key: key.toString('base64url') });
        await refused(checkoutLicense(db, license.id, { ttlDays: 7, activationRequest: text }, context), 'ACTIVATION_REQUEST_MALFORMED', /"machine_key" is an X25519 point of small order/);
      }
    }
    // A machine key the library is given beside a hardware ID: the same points refused.
    await refused(checkoutLicense(db, sealed.id, { ttlDays: 7, hardwareId: 'hw2-small-order', machineKey: keys[0]!.toString('base64url') }, context), 'INVALID_INPUT', /small order/);
    assert.deepEqual(await db.query('SELECT hardware_id FROM machines WHERE hardware_id = ?', ['hw2-small-order']), []);
    assert.deepEqual(await db.query('SELECT nonce FROM activation_requests WHERE hardware_id = ?', ['hw2-small-order']), []);
  });

  it('an online answer for a machine whose recorded key is of small order (an older release recorded it) carries no key, rather than failing', async () => {
    const customerId = (await createCustomer(db, { name: 'Recorded Small Order' }, setup)).id;
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', withDecryptionKey: true }, setup);
    await checkoutLicense(db, license.id, { ttlDays: 7, activationRequest: requestFor(license.key, 'hw2-recorded').text }, context);
    await db.execute('UPDATE machines SET machine_key = ? WHERE license_id = ?', [Buffer.alloc(32).toString('base64url'), license.id]);
    await updateLicense(db, license.id, { binding: 'machine-key' }, setup);
    const answer = await validateOnline(db, { license_key: license.key, hardware_id: 'hw2-recorded', version: '1.0.0' }, { ...context, graceHours: 24 });
    assert.equal(answer.valid, true);
    assert.deepEqual([(answer as { encrypted_key?: string }).encrypted_key, (answer as { machine_key?: string }).machine_key], [undefined, undefined]);
  });

  it('a nonce recorded without its request\'s digest (before migration 14) is answered again only with the machine\'s recorded key, and then keeps the digest', async () => {
    const customerId = (await createCustomer(db, { name: 'Upgraded Works' }, setup)).id;
    const sealed = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', withDecryptionKey: true, binding: 'machine-key' }, setup);
    const genuine = requestFor(sealed.key, 'hw2-machine-d');
    await checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: genuine.text }, context);
    const digest = async () => (await db.query('SELECT request_digest FROM activation_requests WHERE nonce = ?', [genuine.request.nonce]))[0]!.request_digest;
    assert.match(String(await digest()), /^[A-Za-z0-9_-]{43}$/);
    await db.execute('UPDATE activation_requests SET request_digest = NULL WHERE nonce = ?', [genuine.request.nonce]);
    const altered = requestFor(sealed.key, 'hw2-machine-d', { nonce: genuine.request.nonce, created_at: genuine.request.created_at, machine_key: activationRequestFor(sealed.key, 'x').request.machine_key });
    await refused(checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: altered.text }, at(60_000)), 'ACTIVATION_REQUEST_REPLAYED', /recorded without its digest \(before schema 14\), and this one's machine_key is not the key recorded for its machine$/);
    assert.equal(await digest(), null, 'a refusal records nothing');
    await checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: genuine.text }, at(60_000));
    assert.match(String(await digest()), /^[A-Za-z0-9_-]{43}$/);
    await refused(checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: requestFor(sealed.key, 'hw2-machine-d', { nonce: genuine.request.nonce, created_at: genuine.request.created_at, machine_name: 'renamed' }).text }, at(90_000)), 'ACTIVATION_REQUEST_REPLAYED', /other contents/);
    // Its machine no longer recorded (a restore to a backup from before the checkout): nothing tells it from a copy.
    const gone = requestFor(sealed.key, 'hw2-machine-e');
    await checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: gone.text }, context);
    await db.execute('UPDATE activation_requests SET request_digest = NULL WHERE nonce = ?', [gone.request.nonce]);
    await db.execute('DELETE FROM machines WHERE license_id = ? AND hardware_id = ?', [sealed.id, 'hw2-machine-e']);
    await refused(checkoutLicense(db, sealed.id, { ttlDays: 7, activationRequest: gone.text }, at(60_000)), 'ACTIVATION_REQUEST_REPLAYED', /recorded without its digest/);
  });
});
