import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LicenseClient } from '../../src/client/index.js';
import type { OperationContext } from '../../src/lib/context.js';
import { createCustomer } from '../../src/lib/customers.js';
import { generateKeyPair } from '../../src/lib/crypto/hpke.js';
import { createLicense, getLicenseDecryptionKey } from '../../src/lib/licensing/licenses.js';
import { checkoutLicense } from '../../src/lib/offline/checkout.js';
import { encodeMachineKey } from '../../src/lib/offline/machine-key.js';
import { ensureSigningKey } from '../../src/lib/signing-keys/keys.js';
import type { Database } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';

const clientDir = fileURLToPath(new URL('../../clients/go/', import.meta.url));
// Go from Debian's golang-go, the standard library only: nothing may be downloaded.
const goEnv = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

/**
 * A machine-key-bound file, checked out by the server on each engine with the machine key of
 * an activation request (the library's checkout, as the request's will call it), opened by the
 * Node client and by the Go client only with the machine's private key.
 */
forEachEngine('a machine-key file from the server in the Node and Go clients', (fixture) => {
  const setup: OperationContext = { actor: 'cli:setup' };
  let db: Database;
  let work: string;

  before(async () => {
    db = await fixture.freshDatabase();
    work = mkdtempSync(path.join(tmpdir(), 'machine-key-e2e-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('opens with the machine\'s private key, in both clients, and not without it', async function () {
    this.timeout(300_000);
    const { public_key_pem: pem } = await ensureSigningKey(db, setup);
    const customerId = (await createCustomer(db, { name: 'Air-gapped GmbH' }, setup)).id;
    const license = await createLicense(db, { customerId, type: 'time_based', validUntil: '2099-01-01', withDecryptionKey: true, binding: 'machine-key' }, setup);
    const machine = generateKeyPair();
    const hardwareId = 'hw2-e2e-machine';
    const { license_file: file } = await checkoutLicense(db, license.id, { ttlDays: 30, hardwareId, machineKey: encodeMachineKey(machine.publicKey) }, { actor: 'cli:vendor', issuer: 'licenses.example.com' });
    const licenseFile = path.join(work, 'license.lic');
    const pemFile = path.join(work, 'signing-key.pem');
    writeFileSync(licenseFile, file);
    writeFileSync(pemFile, pem);
    const decryptionKeyHex = (await getLicenseDecryptionKey(db, license.id))!.toString('hex');

    const node = (machinePrivateKey?: Uint8Array) => {
      const client = new LicenseClient({
        licenseKey: license.key, version: '1.0.0', hardwareId,
        offline: { enabled: true, licenseFile, publicKey: pem, cacheDir: path.join(work, `node-${machinePrivateKey ? 'with' : 'without'}`), ...(machinePrivateKey ? { machinePrivateKey } : {}) },
      });
      return client.validate().finally(() => client.close());
    };
    const withKey = await node(machine.privateKey);
    assert.equal(withKey.valid, true, JSON.stringify(withKey.failures));
    assert.equal(Buffer.from(withKey.decryptionKey!).toString('hex'), decryptionKeyHex);
    const withoutKey = await node();
    assert.deepEqual([withoutKey.valid, withoutKey.reason, withoutKey.decryptionKey], [false, 'MACHINE_KEY_MISSING', undefined]);

    if (spawnSync('go', ['version'], { env: goEnv }).status !== 0) {
      if (process.env.CI === 'true') throw new Error('go is not installed (Debian package golang-go)');
      return;
    }
    const go = spawnSync('go', ['test', '-count=1', '-run', '^TestMachineKeyFileFromTheServer$', '-v', '.'], {
      cwd: clientDir,
      encoding: 'utf8',
      env: {
        ...goEnv,
        LICENSE_E2E_MACHINE_KEY_FILE: licenseFile,
        LICENSE_E2E_PUBLIC_KEY_FILE: pemFile,
        LICENSE_E2E_LICENSE_KEY: license.key,
        LICENSE_E2E_HARDWARE_ID: hardwareId,
        LICENSE_E2E_MACHINE_PRIVATE_KEY_HEX: Buffer.from(machine.privateKey).toString('hex'),
        LICENSE_E2E_DECRYPTION_KEY_HEX: decryptionKeyHex,
      },
    });
    assert.equal(go.status, 0, `${go.stdout}\n${go.stderr}`);
    assert.match(go.stdout, /--- PASS: TestMachineKeyFileFromTheServer/);
    assert.match(go.stdout, /opened license\.lic with the machine's private key/);
  });
});
