import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { listAudit } from '../../../src/lib/audit.js';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { publicKeyFromPem } from '../../../src/lib/crypto/ed25519-pem.js';
import { generateKeyPair } from '../../../src/lib/crypto/hpke.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { updateLicense } from '../../../src/lib/licensing/license-changes.js';
import { createLicense, getLicense, getLicenseDecryptionKey } from '../../../src/lib/licensing/licenses.js';
import { unsealDecryptionKey } from '../../../src/lib/offline/binding.js';
import { checkoutLicense } from '../../../src/lib/offline/checkout.js';
import { canonicalPayloadText, decodeLicenseFile, encodeLicenseFile, type LicenseFilePayload } from '../../../src/lib/offline/format.js';
import { decodeMachineKey, encodeMachineKey, machineKeyInfo, sealForMachine, unsealForMachine } from '../../../src/lib/offline/machine-key.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';
import { writeLicenseFile } from '../../../src/lib/offline/write.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

const vector = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v2-machine-key.json', import.meta.url), 'utf8'));
const v1 = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v1.json', import.meta.url), 'utf8'));
const signingPem = readFileSync(new URL('../../vectors/signing-key.pem', import.meta.url), 'utf8');
const bytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex, 'hex'));
const hex = (value: Uint8Array): string => Buffer.from(value).toString('hex');
const vectorNow = new Date('2026-11-22T10:00:00Z');

function code(expected: string) {
  return (error: unknown) => {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, expected, error.message);
    return true;
  };
}

/** The vector's file with its payload changed (and, unless `keepSignature`, unsigned: for decoding only). */
function withPayload(change: (payload: Record<string, unknown>) => void): string {
  const payload = structuredClone(vector.payload) as Record<string, unknown>;
  change(payload);
  return `${Buffer.from(JSON.stringify({ ...payload, signature: vector.signature }), 'utf8').toString('base64')}\n`;
}

describe('machine-key binding: the vector (test/vectors/offline-license-v2-machine-key.json)', () => {
  it('pins HPKE\'s info, enc, key schedule and the 80-byte encrypted_key for the vector\'s keys', () => {
    const { payload } = vector;
    assert.equal(vector.info_text, `license-server/v2/machine-key\n${payload.license_id}\n${payload.hardware_id}`);
    assert.equal(hex(machineKeyInfo(payload.license_id, payload.hardware_id)), vector.info_hex);
    assert.equal(encodeMachineKey(bytes(vector.machine_public_key_hex)), vector.machine_key);
    assert.equal(vector.machine_key.length, 43);
    const sealed = sealForMachine(bytes(vector.decryption_key_hex), bytes(vector.machine_public_key_hex), payload.license_id, payload.hardware_id, bytes(vector.ephemeral_private_key_hex));
    assert.equal(sealed, vector.encrypted_key);
    assert.equal(sealed.length, 108);
    assert.equal(vector.encrypted_key_hex.slice(0, 64), vector.enc_hex, 'encrypted_key starts with enc');
    // The same decryption key as the v1 vector bound-with-key, where the file alone opens it.
    const bound = v1.vectors.find((entry: { name: string }) => entry.name === 'bound-with-key');
    assert.equal(vector.decryption_key_hex, bound.binding.decryption_key_hex);
  });

  it('the file decodes as version 2, verifies with the TEST 1 key, and its canonical form is what is signed', () => {
    const decoded = decodeLicenseFile(vector.file);
    assert.deepEqual(decoded.payload, vector.payload);
    assert.equal(canonicalPayloadText(decoded.payload), vector.canonical_payload);
    assert.equal(Buffer.from(decoded.signedBytes).toString('utf8'), vector.canonical_payload);
    assert.equal(readFileSync(new URL('../../vectors/machine-key.lic', import.meta.url), 'utf8'), vector.file);
    assert.equal(encodeLicenseFile(decoded.payload, decoded.signature), vector.file);
    // machine_key sorts between license_type and signature.
    assert.match(vector.canonical_payload, /"license_type":"hybrid","machine_key":"[^"]+","valid_from"/);
  });

  it('opens with the machine\'s private key, and only with it', () => {
    const machinePrivateKey = bytes(vector.machine_private_key_hex);
    const verified = verifyLicenseFile(vector.file, { publicKey: signingPem, hardwareId: vector.payload.hardware_id, machinePrivateKey, now: vectorNow });
    assert.equal(hex(verified.decryptionKey!), vector.decryption_key_hex);
    assert.throws(
      () => verifyLicenseFile(vector.file, { publicKey: signingPem, hardwareId: vector.payload.hardware_id, now: vectorNow }),
      code('MACHINE_KEY_MISSING'),
    );
    assert.throws(
      () => verifyLicenseFile(vector.file, { publicKey: signingPem, hardwareId: vector.payload.hardware_id, machinePrivateKey: bytes(vector.ephemeral_private_key_hex), now: vectorNow }),
      code('DECRYPTION_FAILED'),
    );
    // The hardware ID is still checked first: another machine's ID is HARDWARE_MISMATCH.
    assert.throws(() => verifyLicenseFile(vector.file, { publicKey: signingPem, hardwareId: 'HW-other', machinePrivateKey, now: vectorNow }), code('HARDWARE_MISMATCH'));
  });

  it('everything in the file does not open it: not the v1 construction, not the public machine key', () => {
    const { payload } = vector;
    // v1's HKDF(hardware_id, license_id), which opens a v1 file from the file alone.
    assert.throws(() => unsealDecryptionKey(payload.encrypted_key, payload.hardware_id, payload.license_id), code('DECRYPTION_FAILED'));
    // A reader that takes the public key for the private one.
    assert.throws(() => unsealForMachine(payload, decodeMachineKey(payload.machine_key)), code('DECRYPTION_FAILED'));
    assert.throws(() => unsealForMachine(payload, undefined), code('MACHINE_KEY_MISSING'));
  });

  it('a changed info (license id or hardware ID) does not open the key, even with the private key', () => {
    const machinePrivateKey = bytes(vector.machine_private_key_hex);
    assert.throws(() => unsealForMachine({ ...vector.payload, hardware_id: 'HW-4f2a-9c1e-u' }, machinePrivateKey), code('DECRYPTION_FAILED'));
    assert.throws(() => unsealForMachine({ ...vector.payload, license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6e' }, machinePrivateKey), code('DECRYPTION_FAILED'));
    const changed = Buffer.from(vector.encrypted_key, 'base64');
    changed[40] = changed[40]! ^ 1;
    assert.throws(() => unsealForMachine({ ...vector.payload, encrypted_key: changed.toString('base64') }, machinePrivateKey), code('DECRYPTION_FAILED'));
  });
});

describe('machine-key binding: docs/offline-license-format.md says what the code does', () => {
  const doc = readFileSync(new URL('../../../docs/offline-license-format.md', import.meta.url), 'utf8');
  const oneLine = (text: string) => text.replace(/\s+/g, ' ');

  it('states plainly what each binding protects against', () => {
    const text = oneLine(doc);
    assert.match(text, /\*\*Hardware-ID binding\*\* .*the file does not work on another machine's client\./);
    assert.match(text, /\*\*Machine-key binding\*\* .*also keeps the decryption key secret from whoever holds the file\./);
    assert.doesNotMatch(text, /only that machine's hardware ID opens it/);
  });

  it('pins the suite, the info string and the 80-byte form the code uses', () => {
    assert.match(doc, /info {10}= UTF-8\("license-server\/v2\/machine-key\\n" \+ license_id \+ "\\n" \+ hardware_id\)/);
    assert.equal(new TextDecoder().decode(machineKeyInfo('L', 'H')), 'license-server/v2/machine-key\nL\nH');
    assert.match(doc, /\| KEM \| DHKEM\(X25519, HKDF-SHA256\) \| `0x0020` \|/);
    assert.match(doc, /\| AEAD \| AES-256-GCM \| `0x0002` \|/);
    assert.match(doc, /encrypted_key = Base64\( enc \|\| ct \) +-- 80 bytes/);
    assert.ok(doc.includes(vector.machine_key), 'the vector\'s machine_key is in the document');
    assert.ok(doc.includes(vector.enc_hex), 'the vector\'s enc is in the document');
  });
});

describe('machine-key binding: what a reader refuses', () => {
  it('a version 2 file without machine_key (and without request_nonce), machine_key in a version 1 file, and version 3', () => {
    assert.throws(() => decodeLicenseFile(withPayload((p) => { delete p.machine_key; delete p.encrypted_key; })), /a version 2 file must carry "request_nonce" or "machine_key"/);
    assert.throws(() => decodeLicenseFile(withPayload((p) => { p.version = 1; })), /"machine_key" is not part of format version 1/);
    assert.throws(() => decodeLicenseFile(withPayload((p) => { p.version = 3; })), code('LICENSE_FILE_UNSUPPORTED_VERSION'));
  });

  it('a machine_key that is not the unpadded base64url of 32 bytes, or without a hardware ID', () => {
    const bad = ['', vector.machine_key.slice(0, 42), `${vector.machine_key}=`, vector.machine_key.replace(/.$/, '9'), Buffer.from(bytes(vector.machine_public_key_hex)).toString('base64').replace(/=$/, '')];
    for (const machineKey of bad) {
      if (machineKey === vector.machine_key) continue;
      assert.throws(() => decodeLicenseFile(withPayload((p) => { p.machine_key = machineKey; })), code('LICENSE_FILE_MALFORMED'), machineKey);
    }
    assert.throws(() => decodeLicenseFile(withPayload((p) => { p.hardware_id = ''; })), code('LICENSE_FILE_MALFORMED'));
  });

  it('an encrypted_key of the v1 length (60 bytes) next to machine_key', () => {
    const bound = v1.vectors.find((entry: { name: string }) => entry.name === 'bound-with-key');
    assert.throws(() => decodeLicenseFile(withPayload((p) => { p.encrypted_key = bound.payload.encrypted_key; })), /must be the Base64 of 80 bytes/);
  });
});

const DAY = 86_400_000;
const fixedNow = new Date('2026-11-22T10:00:00.600Z');
const context = { actor: 'cli:tester', issuer: 'licenses.example.com', clock: () => fixedNow };
const setup: OperationContext = { actor: 'cli:setup', clock: () => new Date(fixedNow.getTime() - DAY) };

forEachEngine('checkout of a machine-key license', (fixture) => {
  let db: Database;
  let publicKey: Uint8Array;
  let customerId: string;

  before(async () => {
    db = await fixture.freshDatabase();
    publicKey = publicKeyFromPem((await ensureSigningKey(db, setup)).public_key_pem);
    customerId = (await createCustomer(db, { name: 'Air-gapped GmbH' }, setup)).id;
  });

  it('is refused with a bare hardware ID (MACHINE_KEY_REQUIRED), and seals to the machine key given', async () => {
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', withDecryptionKey: true, binding: 'machine-key' }, setup);
    assert.equal(license.binding, 'machine-key');
    await assert.rejects(checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'hw2-machine-a' }, context), code('MACHINE_KEY_REQUIRED'));

    const machine = generateKeyPair();
    const result = await checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'hw2-machine-a', machineKey: encodeMachineKey(machine.publicKey) }, context);
    const { payload } = decodeLicenseFile(result.license_file);
    assert.equal(payload.version, 2);
    assert.equal(payload.machine_key, encodeMachineKey(machine.publicKey));
    assert.equal(Buffer.from(payload.encrypted_key!, 'base64').length, 80);
    const decryptionKey = await getLicenseDecryptionKey(db, license.id);
    const verified = verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'hw2-machine-a', machinePrivateKey: machine.privateKey, now: fixedNow });
    assert.equal(hex(verified.decryptionKey!), decryptionKey!.toString('hex'));
    assert.throws(() => verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'hw2-machine-a', now: fixedNow }), code('MACHINE_KEY_MISSING'));
    assert.throws(() => unsealDecryptionKey(payload.encrypted_key!, payload.hardware_id, payload.license_id), code('DECRYPTION_FAILED'));

    // `license checkout --out` reads the file back and verifies it without the machine's key.
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'machine-key-out-')), 'license.lic');
    await writeLicenseFile(out, result.license_file, { publicKey, hardwareId: 'hw2-machine-a', now: fixedNow });
    assert.equal(readFileSync(out, 'utf8'), result.license_file);
    rmSync(path.dirname(out), { recursive: true, force: true });

    // Audited with the machine key (public), never the decryption key.
    const [entry] = (await listAudit(db, { action: 'license.checked_out', entityId: license.id })).filter((row) => (row.details as Record<string, unknown>).machine_key !== undefined);
    assert.equal((entry!.details as Record<string, unknown>).machine_key, payload.machine_key);
  });

  it('a machine-key license without a decryption key writes version 2 with machine_key and no encrypted_key', async () => {
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', binding: 'machine-key' }, setup);
    const machine = generateKeyPair();
    const result = await checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'hw2-machine-b', machineKey: encodeMachineKey(machine.publicKey) }, context);
    const { payload } = verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'hw2-machine-b', now: fixedNow });
    assert.equal(payload.version, 2);
    assert.equal(payload.encrypted_key, undefined);
  });

  it('a hardware-ID license (the default) stays version 1 byte for byte, whatever machine key comes with the checkout', async () => {
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', withDecryptionKey: true }, setup);
    assert.equal(license.binding, 'hardware-id');
    const machine = generateKeyPair();
    const result = await checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'hw2-machine-c', machineKey: encodeMachineKey(machine.publicKey) }, context);
    const { payload } = verifyLicenseFile(result.license_file, { publicKey, hardwareId: 'hw2-machine-c', now: fixedNow });
    assert.equal(payload.version, 1);
    assert.equal(payload.machine_key, undefined);
    assert.equal(Buffer.from(payload.encrypted_key!, 'base64').length, 60);
  });

  it('license update --binding switches the next checkouts; a bad binding or machine key is INVALID_INPUT', async () => {
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', withDecryptionKey: true }, setup);
    const { changes } = await updateLicense(db, license.id, { binding: 'machine-key' }, context);
    assert.deepEqual(changes.binding, { before: 'hardware-id', after: 'machine-key' });
    assert.equal((await getLicense(db, license.id)).binding, 'machine-key');
    await assert.rejects(checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'hw2-machine-d' }, context), code('MACHINE_KEY_REQUIRED'));
    await assert.rejects(updateLicense(db, license.id, { binding: 'machine' }, context), code('INVALID_INPUT'));
    await assert.rejects(createLicense(db, { customerId, type: 'time_based', validUntil: '2028-01-01', binding: 'MACHINE-KEY' }, setup), code('INVALID_INPUT'));
    await assert.rejects(checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'hw2-machine-d', machineKey: 'not-a-key' }, context), code('INVALID_INPUT'));
  });
});

// The payload type admits version 2 and machine_key (a compile-time check as much as a runtime one).
const _typed: LicenseFilePayload = vector.payload;
void _typed;
