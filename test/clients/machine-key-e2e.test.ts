import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LicenseClient } from '../../src/client/index.js';
import { decodeLicenseFile } from '../../src/lib/offline/format.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { PYTHON, runPythonJson } from '../support/python.js';

const clientDir = fileURLToPath(new URL('../../clients/go/', import.meta.url));
const reader = fileURLToPath(new URL('./machine-key-reader.py', import.meta.url));
// Go from Debian's golang-go, the standard library only: nothing may be downloaded.
const goEnv = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

/** The Python reader (machine-key-reader.py, written from the format doc alone): exit status and what it says. */
function readWithPython(file: string, machinePrivateKeyHex?: string): { status: number | null; opened_by: string | null; decryption_key_hex?: string } {
  return runPythonJson([reader, file, ...(machinePrivateKeyHex ? ['--machine-private-key', machinePrivateKeyHex] : [])]);
}

/**
 * The three pieces of issue 28 together, on each engine: a license bound with machine-key;
 * the Node client makes an activation request (its key pair stays in the cache); the
 * operator runs `license checkout --request`; the client installs the file and, with no
 * private key given, verifies it offline and opens its decryption key with the key its cache
 * kept; `license verify --machine-private-key` takes that key as the cache stores it; the
 * Python reader opens nothing from the file alone and the key with the machine's private key;
 * and the Go client opens the same file, from the same cache directory too.
 */
forEachEngine('machine-key binding by activation request, end to end (CLI, Node and Go clients, Python reader)', (fixture) => {
  let work: string;
  let env: Record<string, string>;

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'machine-key-e2e-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('request, checkout --request, install, offline validation with the cached key; refused without a request', async function () {
    this.timeout(300_000);
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Air-gapped GmbH', '--json')).json();
    const license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-01-01', '--with-decryption-key', '--binding', 'machine-key', '--json')).json();
    const decryptionKeyHex: string = ok(await cli('license', 'show', license.id, '--reveal-decryption-key', '--json')).json().decryption_key;
    const pem = ok(await cli('signing-key', 'show')).stdout;
    const pemFile = path.join(work, 'signing-key.pem');
    writeFileSync(pemFile, pem);

    // A bare hardware ID is not enough for a machine-key license.
    const bare = await cli('license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'hw2-e2e-machine', '--out', work);
    assert.equal(bare.code, 6, bare.stdout);
    assert.match(bare.stderr, /MACHINE_KEY_REQUIRED/);

    const hardwareId = 'hw2-e2e-machine';
    const cacheDir = path.join(work, 'cache');
    const licenseFile = path.join(work, 'app', 'license.lic');
    const clientOptions = { licenseKey: license.key, version: '1.0.0', hardwareId, offline: { enabled: true, licenseFile, publicKey: pem, cacheDir } };
    mkdirSync(path.dirname(licenseFile));
    const machine = new LicenseClient(clientOptions);
    const { text, request } = await machine.createActivationRequest({ machineName: 'e2e bench' });
    const requestFile = path.join(work, 'activation-request.txt');
    writeFileSync(requestFile, text);

    const outDir = path.join(work, 'usb');
    mkdirSync(outDir);
    ok(await cli('license', 'checkout', license.key, '--ttl-days', '30', '--request', requestFile, '--out', outDir));
    const [written] = readdirSync(outDir);
    const file = readFileSync(path.join(outDir, written!), 'utf8');
    const { payload } = decodeLicenseFile(file);
    assert.equal(payload.version, 2);
    assert.equal(payload.request_nonce, request.nonce);
    assert.equal(payload.machine_key, request.machine_key);
    assert.equal(payload.hardware_id, hardwareId);
    assert.equal(Buffer.from(payload.encrypted_key!, 'base64').length, 80, 'the HPKE form');

    const installed = await machine.installLicenseFile(file);
    assert.equal(installed.requestNonce, request.nonce);
    machine.close();
    const cached = JSON.parse(readFileSync(path.join(cacheDir, readdirSync(cacheDir)[0]!, 'machine-key.json'), 'utf8'));
    assert.equal(cached.machine_key, request.machine_key);

    // A new start of the application: no private key given, the cache's opens the file.
    const restarted = new LicenseClient(clientOptions);
    const result = await restarted.validate().finally(() => restarted.close());
    assert.equal(result.valid, true, JSON.stringify(result.failures));
    assert.equal(result.source, 'license-file');
    assert.equal(Buffer.from(result.decryptionKey!).toString('hex'), decryptionKeyHex);
    // Without the cache's key (another cache directory), the file verifies but its key stays sealed.
    const elsewhere = new LicenseClient({ ...clientOptions, offline: { ...clientOptions.offline, cacheDir: path.join(work, 'other-cache') } });
    const sealed = await elsewhere.validate().finally(() => elsewhere.close());
    assert.deepEqual([sealed.valid, sealed.reason, sealed.decryptionKey], [false, 'MACHINE_KEY_MISSING', undefined]);

    // license verify takes the private key as the request flow stores it (unpadded base64url).
    const keyFile = path.join(work, 'machine-private-key.txt');
    writeFileSync(keyFile, `${cached.private_key}\n`, { mode: 0o600 });
    const verified = ok(await cli('license', 'verify', licenseFile, '--public-key', pemFile, '--hardware-id', hardwareId, '--machine-private-key', keyFile));
    assert.match(verified.stdout, /unsealed for this machine key/);
    assert.doesNotMatch(verified.stdout + verified.stderr, new RegExp(cached.private_key));

    const privateKeyHex = Buffer.from(cached.private_key, 'base64url').toString('hex');
    if (spawnSync(PYTHON, ['-c', 'import cryptography.hazmat.primitives.ciphers.aead']).status === 0) {
      const alone = readWithPython(licenseFile);
      assert.deepEqual([alone.status, alone.opened_by], [1, null]);
      const withKey = readWithPython(licenseFile, privateKeyHex);
      assert.equal(withKey.status, 0);
      assert.equal(withKey.decryption_key_hex, decryptionKeyHex);
    } else if (process.env.CI === 'true') {
      throw new Error(`${PYTHON} with the cryptography package is required`);
    }

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
        LICENSE_E2E_MACHINE_PRIVATE_KEY_HEX: privateKeyHex,
        LICENSE_E2E_DECRYPTION_KEY_HEX: decryptionKeyHex,
        LICENSE_E2E_CACHE_DIR: cacheDir,
      },
    });
    assert.equal(go.status, 0, `${go.stdout}\n${go.stderr}`);
    assert.match(go.stdout, /--- PASS: TestMachineKeyFileFromTheServer/);
    assert.match(go.stdout, /opened license\.lic with the machine's private key/);
    assert.match(go.stdout, /opened license\.lic with the key of the Node client's cache/);
  });
});
