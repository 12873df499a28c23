import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { LicenseClient, LicenseClientError } from '../../src/client/index.js';
import { deriveHardwareId } from '../../src/client/hardware-id.js';
import { ClientStore } from '../../src/client/store.js';
import { decodeActivationRequest } from '../../src/lib/offline/activation-request.js';
import { decodeLicenseFile } from '../../src/lib/offline/format.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

const run = promisify(execFile);
const packageCli = fileURLToPath(new URL('../../packages/client/dist/esm/client/cli.js', import.meta.url));

/**
 * The air-gapped round trip by request file (issue 28): the machine makes a request, the
 * operator checks the license out with it (`license checkout --request`), the machine
 * installs the file, which it checks answers its request, and validates offline with it.
 * Real CLI processes on a real store of each engine; the client's own files on disk.
 */
forEachEngine('activation by request file, Node client and license checkout --request', (fixture) => {
  let work: string;
  let env: Record<string, string>;
  let publicKey: string;
  let license: { id: string; key: string };
  const cli = (...args: string[]) => runCli(args, { env, cwd: work });
  const file = (...names: string[]) => path.join(work, ...names);
  const machine = (hardwareId: string, cacheDir: string) => new LicenseClient({
    licenseKey: license.key,
    version: '4.2.0',
    hardwareId,
    offline: { enabled: true, licenseFile: file(`${hardwareId}.lic`), publicKey, cacheDir },
  });
  /** `license checkout --request` of a request text, writing into a fresh directory: the file's path. */
  const checkout = async (requestText: string, name: string) => {
    mkdirSync(file(name));
    writeFileSync(file(name, 'request.txt'), requestText);
    ok(await cli('license', 'checkout', license.key, '--ttl-days', '30', '--request', file(name, 'request.txt'), '--out', file(name)));
    const lic = readdirSync(file(name)).find((entry) => entry.endsWith('.lic'))!;
    return file(name, lic);
  };
  const wrongRequest = (pattern: RegExp) => (error: unknown) => {
    assert.ok(error instanceof LicenseClientError, String(error));
    assert.equal(error.code, 'LICENSE_FILE_WRONG_REQUEST', error.message);
    assert.match(error.message, pattern);
    return true;
  };

  before(async function () {
    this.timeout(60_000);
    work = mkdtempSync(path.join(tmpdir(), 'license-activation-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Air-gapped Works', '--json')).json();
    license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--max-machines', '3', '--with-decryption-key', '--json')).json();
    publicKey = ok(await cli('signing-key', 'show')).stdout;
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('request, checkout --request, install, validate offline: the file answers the machine\'s request', async function () {
    this.timeout(60_000);
    const cacheDir = file('cache-bench');
    const client = machine('hw2-bench', cacheDir);
    const { text, request } = await client.createActivationRequest({ machineName: 'bench 3' });
    assert.deepEqual(decodeActivationRequest(text), request);
    assert.equal(request.hardware_id, 'hw2-bench');
    assert.doesNotMatch(text, new RegExp(license.key.slice(9)), 'the license key is not in the request');
    const pending = path.join(cacheDir, readdirSync(cacheDir)[0]!, 'pending-request.json');
    assert.equal(statSync(pending).mode & 0o777, 0o600);
    assert.equal(JSON.parse(readFileSync(pending, 'utf8')).nonce, request.nonce);
    assert.doesNotMatch(text, new RegExp(JSON.parse(readFileSync(pending, 'utf8')).private_key), 'the private key stays on the machine');

    const lic = await checkout(text, 'usb-1');
    const payload = decodeLicenseFile(readFileSync(lic)).payload;
    assert.deepEqual([payload.version, payload.request_nonce, payload.hardware_id], [2, request.nonce, 'hw2-bench']);

    const installed = await client.installLicenseFile(readFileSync(lic));
    assert.deepEqual([installed.file, installed.requestNonce, installed.hardwareId], [file('hw2-bench.lic'), request.nonce, 'hw2-bench']);
    assert.deepEqual(readFileSync(file('hw2-bench.lic')), readFileSync(lic));
    assert.equal(existsSync(pending), false, 'the pending request is forgotten');
    const machineKey = path.join(path.dirname(pending), 'machine-key.json');
    assert.equal(statSync(machineKey).mode & 0o777, 0o600);
    assert.equal(JSON.parse(readFileSync(machineKey, 'utf8')).machine_key, request.machine_key);
    // Installing the same file again (a second copy) is fine.
    await client.installLicenseFile(readFileSync(lic, 'latin1'));

    const result = await client.validate();
    assert.equal(result.valid, true, JSON.stringify(result.failures));
    assert.equal(result.source, 'license-file');
    assert.equal(result.licenseId, license.id);
    assert.equal(result.decryptionKey?.length, 32);
    client.close();

    const seats = ok(await cli('machine', 'list', '--license', license.id, '--json')).json();
    assert.deepEqual(seats.map((m: { hardware_id: string; name: string }) => [m.hardware_id, m.name]), [['hw2-bench', 'bench 3']]);
  });

  it('install refuses a file made for another machine, and one made for an older request', async function () {
    this.timeout(60_000);
    const bench = machine('hw2-lab', file('cache-lab'));
    const other = machine('hw2-other', file('cache-other'));
    const older = await bench.createActivationRequest();
    const newer = await bench.createActivationRequest();
    assert.notEqual(older.request.nonce, newer.request.nonce);
    await other.createActivationRequest();
    const olderFile = await checkout(older.text, 'usb-older');
    await assert.rejects(
      other.installLicenseFile(readFileSync(olderFile)),
      wrongRequest(/^the license file is for another machine: it is bound to hardware ID "hw2-lab", this machine's is "hw2-other"$/),
    );
    await assert.rejects(
      bench.installLicenseFile(readFileSync(olderFile)),
      wrongRequest(new RegExp(`^the license file answers an older request of this machine \\(${older.request.nonce}, made at ${older.request.created_at}\\), replaced since: this machine's pending request is ${newer.request.nonce}`)),
    );
    assert.equal(existsSync(file('hw2-lab.lic')), false, 'nothing was put in place');
    assert.equal(existsSync(file('hw2-other.lic')), false);
    // A file checked out with --hardware-id answers no request.
    ok(await cli('license', 'checkout', license.key, '--ttl-days', '30', '--hardware-id', 'hw2-lab', '--out', file('by-id.lic')));
    await assert.rejects(bench.installLicenseFile(readFileSync(file('by-id.lic'))), wrongRequest(/^the license file was not made from an activation request \(it has no request_nonce\)/));
    // The newer request's file installs.
    await bench.installLicenseFile(readFileSync(await checkout(newer.text, 'usb-newer')));
    assert.equal((await bench.validate()).valid, true);
    bench.close();
    other.close();
  });

  it('keep: "return": nothing in the cache; the application hands the pending request to installLicenseFile', async function () {
    this.timeout(60_000);
    const cacheDir = file('cache-app');
    const client = machine('hw2-bench', cacheDir);
    const { text, request, pending } = await client.createActivationRequest({ keep: 'return' });
    assert.deepEqual([pending?.nonce, pending?.hardwareId, pending?.machineKey], [request.nonce, 'hw2-bench', request.machine_key]);
    assert.equal(existsSync(cacheDir), false, 'nothing written');
    const lic = readFileSync(await checkout(text, 'usb-app'));
    await assert.rejects(client.installLicenseFile(lic), wrongRequest(/no activation request is pending on this machine$/));
    const installed = await client.installLicenseFile(lic, { pending: pending! });
    assert.equal(installed.requestNonce, request.nonce);
    assert.equal(existsSync(cacheDir), false, 'the application keeps the key pair: still nothing in the cache');
    await assert.rejects(client.installLicenseFile(lic, { pending: { ...pending!, nonce: 'x' } }), /pending must be the `pending` of createActivationRequest/);
    client.close();
  });

  it('the package\'s command: license-server-client request, then install, with the key from a file', async function () {
    this.timeout(60_000);
    assert.ok(existsSync(packageCli), 'run the build first (npm run build)');
    writeFileSync(file('license-key'), `${license.key}\n`);
    writeFileSync(file('signing-key.pem'), publicKey);
    const common = ['--license-key-file', file('license-key'), '--cache-dir', file('cache-cli'), '--hardware-id', 'hw2-cli'];
    const made = await run(process.execPath, [packageCli, 'request', ...common, '--out', file('cli-request.txt')]);
    assert.match(made.stdout, /^Wrote .*cli-request\.txt: activation request [A-Za-z0-9_-]{22} of .* for hardware ID "hw2-cli"\./);
    const lic = await checkout(readFileSync(file('cli-request.txt'), 'utf8'), 'usb-cli');
    const installed = await run(process.execPath, [packageCli, 'install', lic, ...common, '--license-file', file('cli.lic'), '--public-key', file('signing-key.pem')]);
    assert.match(installed.stdout, new RegExp(`^Installed .*cli\\.lic: license ${license.id}, valid until .*, bound to "hw2-cli"`));
    assert.deepEqual(readFileSync(file('cli.lic')), readFileSync(lic));
    // Again, into another machine's cache: refused, exit 1, with the code.
    await assert.rejects(
      run(process.execPath, [packageCli, 'install', lic, '--license-key-file', file('license-key'), '--cache-dir', file('cache-cli-2'), '--hardware-id', 'hw2-elsewhere', '--license-file', file('cli-2.lic'), '--public-key', file('signing-key.pem')]),
      (error: { code: number; stderr: string }) => {
        assert.equal(error.code, 1);
        assert.match(error.stderr, /^Error: LICENSE_FILE_WRONG_REQUEST: the license file is for another machine/);
        return true;
      },
    );
    // No license key on the command line: it is a usage error without a file or the environment.
    await assert.rejects(run(process.execPath, [packageCli, 'request', '--out', file('x.txt')], { env: { PATH: process.env.PATH ?? '' } }), (error: { code: number; stderr: string }) => {
      assert.equal(error.code, 2);
      assert.match(error.stderr, /the license key is needed: --license-key-file FILE, or \$LICENSE_SERVER_LICENSE_KEY/);
      return true;
    });
  });

  it('a machine that moved from hw1 to hw2 names its hw1 ID in the request, and the checkout moves its machine, holding the one seat', async function () {
    this.timeout(60_000);
    const hardwareId = deriveHardwareId();
    if (!hardwareId.startsWith('hw2-')) this.skip();
    const customer = ok(await cli('customer', 'create', '--name', 'Moved Works', '--json')).json();
    const single = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--max-machines', '1', '--json')).json();
    const hw1 = `hw1-${'5e'.repeat(20)}`;
    mkdirSync(file('moved'));
    ok(await cli('license', 'checkout', single.key, '--ttl-days', '30', '--hardware-id', hw1, '--out', file('moved')));
    const machinesOf = async () => ok(await cli('machine', 'list', '--license', single.id, '--json')).json().map((row: { hardware_id: string }) => row.hardware_id);
    assert.deepEqual(await machinesOf(), [hw1]);
    const cacheDir = file('moved-cache');
    // What an older client version left: the hw1 ID remembered next to the hw2 one in use.
    await new ClientStore(cacheDir, single.key).writeHardwareIds({ hardware_id: hardwareId, previous_hardware_id: hw1 });
    const client = new LicenseClient({ licenseKey: single.key, version: '4.2.0', offline: { enabled: true, licenseFile: file('moved.lic'), publicKey, cacheDir } });
    const { text, request } = await client.createActivationRequest();
    assert.equal(request.hardware_id, hardwareId);
    assert.equal(request.previous_hardware_id, hw1);
    writeFileSync(file('moved', 'request.txt'), text);
    // The one seat is the hw1 machine's: only its move lets the request through.
    ok(await cli('license', 'checkout', single.key, '--ttl-days', '30', '--request', file('moved', 'request.txt'), '--out', file('moved', 'by-request.lic')));
    await client.installLicenseFile(readFileSync(file('moved', 'by-request.lic')));
    client.close();
    assert.deepEqual(await machinesOf(), [hardwareId]);
  });
});
