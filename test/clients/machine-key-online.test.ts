import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LicenseClient } from '../../src/client/index.js';
import { unsealDecryptionKey } from '../../src/lib/offline/binding.js';
import { unsealForMachine } from '../../src/lib/offline/machine-key.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const clientDir = fileURLToPath(new URL('../../clients/go/', import.meta.url));
// Go from Debian's golang-go, the standard library only: nothing may be downloaded.
const goEnv = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

/**
 * The online path of a machine-key license (issue 28): `POST /api/v1/validate` must not hand
 * the decryption key to whoever holds the license key. It seals the key to the machine key
 * recorded from the machine's activation request, and to nothing else; a hardware ID with no
 * request on record gets no key. Before this, the answer was sealed the hardware-ID way, which
 * the license key and any hardware ID opened.
 */
forEachEngine('machine-key license online: the answer\'s key opens only with the machine\'s private key (serve, Node and Go clients)', (fixture) => {
  let work: string;
  let serve: ServeProcess;
  let databaseUrl: string;

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'machine-key-online-'));
    databaseUrl = await fixture.freshUrl();
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
    rmSync(work, { recursive: true, force: true });
  });

  it('request, checkout --request, then online: sealed to the recorded key; another cache, a raw caller or an unrecorded machine gets nothing it can open', async function () {
    this.timeout(300_000);
    const env = { LICENSE_DATABASE_URL: databaseUrl };
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Online Keys AG', '--json')).json();
    const license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-01-01', '--with-decryption-key', '--binding', 'machine-key', '--json')).json();
    const decryptionKeyHex: string = ok(await cli('license', 'show', license.id, '--reveal-decryption-key', '--json')).json().decryption_key;
    const pem = ok(await cli('signing-key', 'show')).stdout;
    serve = await startServe({ ...env, LICENSE_CLIENT_RATE_LIMIT: '0' });
    const serverAddr = new URL(serve.url).host;

    const hardwareId = 'hw2-online-machine';
    const cacheDir = path.join(work, 'cache');
    const licenseFile = path.join(work, 'app', 'license.lic');
    mkdirSync(path.dirname(licenseFile));
    const options = { serverAddr, licenseKey: license.key, version: '1.0.0', hardwareId, requestTimeout: 5000, offline: { enabled: true, licenseFile, publicKey: pem, cacheDir } };
    const validate = async (overrides: Partial<typeof options> = {}) => {
      const client = new LicenseClient({ ...options, ...overrides });
      return client.validate().finally(() => client.close());
    };

    // Before any request: the machine validates, but no key can be on its answer.
    const before = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: hardwareId, version: '1.0.0' } });
    assert.equal(before.status, 200);
    assert.equal(before.body.valid, true);
    assert.deepEqual([before.body.encrypted_key, before.body.machine_key], [undefined, undefined], 'no machine key on record: no key at all');

    const machine = new LicenseClient(options);
    const { text, request } = await machine.createActivationRequest({ machineName: 'online bench' });
    const requestFile = path.join(work, 'activation-request.txt');
    writeFileSync(requestFile, text);
    const outDir = path.join(work, 'usb');
    mkdirSync(outDir);
    ok(await cli('license', 'checkout', license.key, '--ttl-days', '30', '--request', requestFile, '--out', outDir));
    const machines = ok(await cli('machine', 'list', '--license', license.id, '--json')).json();
    assert.equal(machines.find((m: { hardware_id: string }) => m.hardware_id === hardwareId).machine_key, request.machine_key, 'the checkout recorded the request\'s key');

    // Checked out, not installed yet: the pending request's key opens the online answer.
    const pending = await validate();
    assert.equal(pending.source, 'online');
    assert.equal(Buffer.from(pending.decryptionKey!).toString('hex'), decryptionKeyHex);
    await machine.installLicenseFile(readFileSync(path.join(outDir, readdirSync(outDir)[0]!), 'utf8'));
    machine.close();
    const online = await validate();
    assert.deepEqual([online.valid, online.source], [true, 'online']);
    assert.equal(Buffer.from(online.decryptionKey!).toString('hex'), decryptionKeyHex, 'installed: machine-key.json opens it');

    // Whoever holds the license key asks for the same hardware ID: the key is sealed to the
    // machine's key, and the hardware-ID construction (everything the caller knows) opens nothing.
    const offered = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: hardwareId, version: '1.0.0', machine_key: 'A'.repeat(43) } });
    assert.deepEqual([offered.status, offered.body.error?.code], [400, 'INVALID_INPUT'], 'a caller cannot name the key to seal to');
    const raw = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: hardwareId, version: '1.0.0' } });
    assert.equal(raw.body.machine_key, request.machine_key, 'the recorded key');
    assert.equal(Buffer.from(raw.body.encrypted_key, 'base64').length, 80, 'the HPKE form');
    assert.throws(() => unsealDecryptionKey(raw.body.encrypted_key, hardwareId, license.id), { code: 'DECRYPTION_FAILED' });
    const cached = JSON.parse(readFileSync(path.join(cacheDir, readdirSync(cacheDir)[0]!, 'machine-key.json'), 'utf8'));
    const opened = unsealForMachine({ ...raw.body, hardware_id: hardwareId }, new Uint8Array(Buffer.from(cached.private_key, 'base64url')));
    assert.equal(Buffer.from(opened).toString('hex'), decryptionKeyHex);
    // Another hardware ID on the license: valid, and no key.
    const stranger = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: 'hw2-someone-else', version: '1.0.0' } });
    assert.deepEqual([stranger.body.valid, stranger.body.encrypted_key, stranger.body.machine_key], [true, undefined, undefined]);

    // The same hardware ID from another cache (no private key): refused with MACHINE_KEY_MISSING.
    const elsewhere = await validate({ offline: { ...options.offline, cacheDir: path.join(work, 'other-cache') } });
    assert.deepEqual([elsewhere.valid, elsewhere.reason, elsewhere.decryptionKey], [false, 'MACHINE_KEY_MISSING', undefined]);

    if (spawnSync('go', ['version'], { env: goEnv }).status !== 0) {
      if (process.env.CI === 'true') throw new Error('go is not installed (Debian package golang-go)');
      return;
    }
    const go = spawnSync('go', ['test', '-count=1', '-run', '^TestMachineKeyOnlineFromTheServer$', '-v', '.'], {
      cwd: clientDir,
      encoding: 'utf8',
      env: {
        ...goEnv,
        LICENSE_E2E_SERVER_ADDR: serverAddr,
        LICENSE_E2E_LICENSE_KEY: license.key,
        LICENSE_E2E_HARDWARE_ID: hardwareId,
        LICENSE_E2E_PUBLIC_KEY_PEM: pem,
        LICENSE_E2E_DECRYPTION_KEY_HEX: decryptionKeyHex,
        LICENSE_E2E_CACHE_DIR: cacheDir,
        LICENSE_E2E_LICENSE_FILE: licenseFile,
      },
    });
    assert.equal(go.status, 0, `${go.stdout}\n${go.stderr}`);
    assert.match(go.stdout, /opened the online answer with the key of the machine's cache/);
    assert.match(go.stdout, /another cache opens nothing: MACHINE_KEY_MISSING/);
  });
});
