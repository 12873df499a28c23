import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { OperationContext } from '../../src/lib/context.js';
import { createCustomer } from '../../src/lib/customers.js';
import { generateKeyPair } from '../../src/lib/crypto/hpke.js';
import { createLicense, getLicenseDecryptionKey } from '../../src/lib/licensing/licenses.js';
import { checkoutLicense } from '../../src/lib/offline/checkout.js';
import { encodeMachineKey } from '../../src/lib/offline/machine-key.js';
import { ensureSigningKey } from '../../src/lib/signing-keys/keys.js';
import type { Database } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';
import { requirePythonCryptography, runPythonJson } from '../support/python.js';

const reader = fileURLToPath(new URL('./machine-key-reader.py', import.meta.url));
const vectors = new URL('../vectors/', import.meta.url);
const machineVector = JSON.parse(readFileSync(new URL('offline-license-v2-machine-key.json', vectors), 'utf8'));
const v1 = JSON.parse(readFileSync(new URL('offline-license-v1.json', vectors), 'utf8'));

interface ReaderResult {
  readonly status: number | null;
  readonly version: number;
  readonly sealed_length: number;
  readonly attempts: number;
  readonly opened_by: string | null;
  readonly decryption_key_hex?: string;
}

/** The Python reader (test/clients/machine-key-reader.py), written from the docs alone. */
function readWithPython(file: string, machinePrivateKeyHex?: string): ReaderResult {
  const args = [reader, file, ...(machinePrivateKeyHex ? ['--machine-private-key', machinePrivateKeyHex] : [])];
  return runPythonJson<Omit<ReaderResult, 'status'>>(args);
}

describe('an independent reader (Python, from docs/offline-license-format.md alone) and the sealed key', function () {
  this.timeout(60_000);
  let directory: string;

  before(function () {
    requirePythonCryptography(this);
    directory = mkdtempSync(path.join(tmpdir(), 'machine-key-reader-'));
  });
  after(() => directory && rmSync(directory, { recursive: true, force: true }));

  it('opens a version 1 (hardware-ID) file from the file alone, as section 7 says', () => {
    const file = fileURLToPath(new URL('bound-with-key.lic', vectors));
    const result = readWithPython(file);
    const bound = v1.vectors.find((vector: { name: string }) => vector.name === 'bound-with-key');
    assert.equal(result.status, 0);
    assert.equal(result.version, 1);
    assert.match(result.opened_by!, /hardware_id and license_id/);
    assert.equal(result.decryption_key_hex, bound.binding.decryption_key_hex);
  });

  it('does not open the machine-key vector with everything in the file, and opens it with the machine\'s private key', () => {
    const file = fileURLToPath(new URL('machine-key.lic', vectors));
    const alone = readWithPython(file);
    assert.equal(alone.status, 1);
    assert.equal(alone.version, 2);
    assert.equal(alone.sealed_length, 80);
    assert.equal(alone.opened_by, null);
    assert.ok(alone.attempts > 50, `only ${alone.attempts} attempts`);
    const withKey = readWithPython(file, machineVector.machine_private_key_hex);
    assert.equal(withKey.status, 0);
    assert.equal(withKey.opened_by, 'the machine\'s private key');
    assert.equal(withKey.decryption_key_hex, machineVector.decryption_key_hex);
    // The same decryption key the v1 vector gives away from its file alone.
    assert.equal(withKey.decryption_key_hex, v1.vectors.find((vector: { name: string }) => vector.name === 'bound-with-key').binding.decryption_key_hex);
  });

  forEachEngine('files checked out by the server', (fixture) => {
    const setup: OperationContext = { actor: 'cli:setup' };
    const context = { actor: 'cli:tester', issuer: 'licenses.example.com' };
    let db: Database;
    let customerId: string;

    before(async () => {
      db = await fixture.freshDatabase();
      await ensureSigningKey(db, setup);
      customerId = (await createCustomer(db, { name: 'Air-gapped GmbH' }, setup)).id;
    });

    it('a machine-key license\'s file opens only with the machine\'s private key; a hardware-ID license\'s from the file alone', async () => {
      const machineBound = await createLicense(db, { customerId, type: 'time_based', validUntil: '2030-01-01', withDecryptionKey: true, binding: 'machine-key' }, setup);
      const hardwareBound = await createLicense(db, { customerId, type: 'time_based', validUntil: '2030-01-01', withDecryptionKey: true }, setup);
      const machine = generateKeyPair();
      const request = { ttlDays: 30, hardwareId: 'hw2-air-gapped', machineKey: encodeMachineKey(machine.publicKey) };

      const machineFile = path.join(directory, `${fixture.engine}-machine-key.lic`);
      writeFileSync(machineFile, (await checkoutLicense(db, machineBound.id, request, context)).license_file);
      const alone = readWithPython(machineFile);
      assert.equal(alone.status, 1, JSON.stringify(alone));
      assert.equal(alone.opened_by, null);
      const withKey = readWithPython(machineFile, Buffer.from(machine.privateKey).toString('hex'));
      assert.equal(withKey.decryption_key_hex, (await getLicenseDecryptionKey(db, machineBound.id))!.toString('hex'));
      // Another machine's private key does not open it either.
      assert.equal(readWithPython(machineFile, Buffer.from(generateKeyPair().privateKey).toString('hex')).opened_by, null);

      const hardwareFile = path.join(directory, `${fixture.engine}-hardware-id.lic`);
      writeFileSync(hardwareFile, (await checkoutLicense(db, hardwareBound.id, request, context)).license_file);
      const opened = readWithPython(hardwareFile);
      assert.equal(opened.version, 1);
      assert.equal(opened.decryption_key_hex, (await getLicenseDecryptionKey(db, hardwareBound.id))!.toString('hex'));
    });
  });
});
