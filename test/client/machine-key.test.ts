import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LicenseClient, LicenseClientConfigError } from '../../src/client/index.js';
import { FakeClock } from '../support/fake-clock.js';

const vectors = new URL('../vectors/', import.meta.url);
const vector = JSON.parse(readFileSync(new URL('offline-license-v2-machine-key.json', vectors), 'utf8'));
const publicKey = readFileSync(new URL('signing-key.pem', vectors), 'utf8');
const licenseFile = fileURLToPath(new URL('machine-key.lic', vectors));

/** The Node client on an air-gapped machine with the machine-key vector (docs/client.md, "Machine-key binding"). */
describe('the client and a machine-key file (format version 2)', () => {
  let work: string;
  const clients: LicenseClient[] = [];
  before(() => (work = mkdtempSync(path.join(tmpdir(), 'machine-key-client-'))));
  afterEach(() => clients.splice(0).forEach((c) => c.close()));
  after(() => rmSync(work, { recursive: true, force: true }));

  const client = (machinePrivateKey: Uint8Array | undefined, name: string) => {
    const c = new LicenseClient({
      licenseKey: `${vector.payload.license_key_prefix}D-1RTV-AAAA-BBBB-CCCC-DDDD-EEEE`,
      version: '1.0.0',
      hardwareId: vector.payload.hardware_id,
      clock: new FakeClock(new Date('2026-11-22T12:00:00Z')),
      offline: { enabled: true, licenseFile, publicKey, cacheDir: path.join(work, name), ...(machinePrivateKey ? { machinePrivateKey } : {}) },
    });
    clients.push(c);
    return c;
  };

  it('opens the decryption key with offline.machinePrivateKey', async () => {
    const result = await client(new Uint8Array(Buffer.from(vector.machine_private_key_hex, 'hex')), 'with-key').validate();
    assert.equal(result.valid, true, JSON.stringify(result.failures));
    assert.equal(result.source, 'license-file');
    assert.equal(Buffer.from(result.decryptionKey!).toString('hex'), vector.decryption_key_hex);
  });

  it('without the machine\'s private key the file is refused with MACHINE_KEY_MISSING, never misread', async () => {
    const result = await client(undefined, 'without-key').validate();
    assert.equal(result.valid, false);
    assert.equal(result.decryptionKey, undefined);
    assert.deepEqual(result.failures.map((failure) => failure.code), ['MACHINE_KEY_MISSING']);
  });

  it('another machine\'s private key is DECRYPTION_FAILED; a key that is not 32 bytes is a configuration error', async () => {
    const result = await client(new Uint8Array(Buffer.from(vector.ephemeral_private_key_hex, 'hex')), 'other-key').validate();
    assert.deepEqual(result.failures.map((failure) => failure.code), ['DECRYPTION_FAILED']);
    assert.throws(() => client(new Uint8Array(31), 'short'), LicenseClientConfigError);
  });
});
