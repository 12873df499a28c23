import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '../../src/lib/storage/open.js';
import { deriveHardwareId } from '../../src/client/hardware-id.js';
import { freePort, LicenseFixture } from '../support/license-fixture.js';

const run = promisify(execFile);
const nodeExample = fileURLToPath(new URL('../../examples/check-license.mjs', import.meta.url));
const exampleDir = fileURLToPath(new URL('../../examples/go/', import.meta.url));
const clientDir = fileURLToPath(new URL('../../clients/go/', import.meta.url));
const doc = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8');
// Go from Debian's golang-go, the standard library only: nothing may be downloaded.
const goEnv = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

function requireGo(this: Mocha.Context): void {
  if (spawnSync('go', ['version'], { env: goEnv }).status === 0) return;
  // Under CI the toolchain is installed by .ci/run: its absence is a failure, not a skip.
  if (process.env.CI === 'true') throw new Error('go is not installed (Debian package golang-go)');
  this.skip();
}

/**
 * The Go example (examples/go), built once, against a real `serve`: the Go client talks to
 * the server the Node client is tested against, through the same four states an application
 * meets. The lines it asserts are the ones examples/check-license.mjs prints.
 */
describe('the Go client against a real serve process (examples/go)', function () {
  this.timeout(600_000);
  let fixture: LicenseFixture;
  let work: string;
  let binary: string;
  let env: Record<string, string>;
  let licenseFile: string;
  let keyFingerprint: string;

  /** The example's output and how long it ran; it must exit 0 and write nothing to stderr. */
  const example = async (extra: Record<string, string> = {}) => {
    const started = Date.now();
    const { stdout, stderr } = await run(binary, [], { env: { ...env, ...extra }, timeout: 60_000 });
    assert.equal(stderr, '');
    return { stdout, ms: Date.now() - started };
  };
  /** `used` of seats and the usage reports the server recorded, read over the API. */
  const serverUsage = async () => {
    const license = (await fixture.api('GET', `/api/licenses/${fixture.license.id}`)).body;
    const seats = license.entitlements.find((e: { code: string }) => e.code === 'seats');
    const reports = (await fixture.api('GET', `/api/licenses/${fixture.license.id}/usage`)).body as Array<{ idempotency_key: string; quantity: number; hardware_id: string }>;
    return { used: seats.used as number, remaining: seats.remaining as number, reports };
  };
  const queueDir = () => {
    const [licenseDir, ...others] = readdirSync(env.CACHE_DIR!);
    assert.deepEqual(others, [], 'one directory per license key');
    return path.join(env.CACHE_DIR!, licenseDir!, 'queue');
  };
  const queued = () => readdirSync(queueDir()).sort().map((name) => JSON.parse(readFileSync(path.join(queueDir(), name), 'utf8')));

  before(async function () {
    requireGo.call(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-go-example-'));
    binary = path.join(work, 'check-license');
    const built = Date.now();
    execFileSync('go', ['vet', '.'], { cwd: exampleDir, env: goEnv, stdio: 'pipe' });
    execFileSync('go', ['build', '-o', binary, '.'], { cwd: exampleDir, env: goEnv, stdio: 'pipe' });
    console.log(`      (go vet and go build of examples/go: ${Date.now() - built} ms)`);

    fixture = await LicenseFixture.start();
    const db = await openDatabase(fixture.databaseUrl);
    try {
      const [row] = await db.query<{ decryption_key: Buffer }>('SELECT decryption_key FROM licenses WHERE id = ?', [fixture.license.id]);
      keyFingerprint = createHash('sha256').update(row!.decryption_key).digest('hex');
    } finally {
      await db.close();
    }
    writeFileSync(path.join(work, 'signing-key.pem'), fixture.pem);
    // A copy: step (c) deletes it.
    licenseFile = path.join(work, 'license.lic');
    copyFileSync(fixture.license.licenseFile, licenseFile);
    mkdirSync(path.join(work, 'cache'));
    env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: work,
      LICENSE_SERVER: fixture.addr,
      LICENSE_KEY: fixture.license.key,
      PUBLIC_KEY_FILE: path.join(work, 'signing-key.pem'),
      LICENSE_FILE: licenseFile,
      HARDWARE_ID: 'test-machine', // the machine the fixture's .lic is bound to
      CACHE_DIR: path.join(work, 'cache'),
      USAGE_CODE: 'seats',
    };
  });
  after(async () => {
    await fixture?.cleanup();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('validates online, then from the .lic file, then from the grace token, and flushes the queue once when the server is back', async () => {
    // (a) Online: the server counts the report at once.
    const online = await example();
    assert.match(online.stdout, /^hardware ID: test-machine$/m);
    assert.match(online.stdout, /^license valid \(online\)$/m);
    assert.match(online.stdout, /^entitlements: export, seats$/m);
    assert.match(online.stdout, new RegExp(`^decryption key: available \\(32 bytes, SHA-256 ${keyFingerprint}\\)$`, 'm'));
    assert.match(online.stdout, /^usage counted, 99 left$/m);
    assert.match(online.stdout, /^usage queue: 0 waiting$/m);
    assert.doesNotMatch(online.stdout, /offline mode/);
    assert.equal((await serverUsage()).used, 1);

    // (b) Server stopped: the .lic file answers, with its sealed key; the report waits.
    await fixture.stopServer();
    const fromFile = await example();
    assert.match(fromFile.stdout, /^offline mode: 7[12]\.\d h of grace left$/m, 'the grace token cached in (a): 72 h by default');
    assert.match(fromFile.stdout, /^license valid \(offline, from the license-file\)$/m);
    assert.match(fromFile.stdout, /^entitlements: export \(restricted offline\), seats$/m);
    assert.match(fromFile.stdout, new RegExp(`^decryption key: available \\(32 bytes, SHA-256 ${keyFingerprint}\\)$`, 'm'));
    assert.match(fromFile.stdout, /^usage queued until the server is back$/m);
    assert.match(fromFile.stdout, /^usage queue: 1 waiting$/m);

    // (c) No .lic file either: the grace token from (a) answers, without a decryption key.
    unlinkSync(licenseFile);
    const fromToken = await example();
    assert.match(fromToken.stdout, /^offline mode: 7[12]\.\d h of grace left$/m);
    assert.match(fromToken.stdout, /^license valid \(offline, from the grace-token\)$/m);
    assert.match(fromToken.stdout, /^entitlements: export \(restricted offline\), seats$/m);
    assert.match(fromToken.stdout, /^decryption key: none$/m);
    assert.match(fromToken.stdout, /^usage queued until the server is back$/m);
    assert.match(fromToken.stdout, /^usage queue: 2 waiting$/m);
    const waiting = queued();
    assert.deepEqual(waiting.map((report) => [report.entitlement_code, report.quantity]), [['seats', 1], ['seats', 1]]);
    const savedName = readdirSync(queueDir()).sort()[0]!;
    const saved = readFileSync(path.join(queueDir(), savedName));

    // (d) The server again, same port and database: the queue goes out, counted once each.
    await fixture.startServer();
    const before = await serverUsage();
    assert.equal(before.used, 1);
    const back = await example({ USAGE_CODE: '' });
    assert.match(back.stdout, /^license valid \(online\)$/m);
    assert.match(back.stdout, /^usage queue: 0 waiting$/m);
    const after = await serverUsage();
    assert.equal(after.used, before.used + 2, 'exactly the two queued reports');
    assert.equal(after.remaining, 97);
    const sent = after.reports.filter((report) => waiting.some((w) => w.idempotency_key === report.idempotency_key));
    assert.equal(sent.length, 2, 'each queued report under its own idempotency key');
    assert.ok(sent.every((report) => report.hardware_id === 'test-machine' && report.quantity === 1));
    assert.equal(after.reports.length, 3);

    // (e) Again: nothing is sent twice, not even a report put back as after a crash
    // between sending it and removing it from the queue.
    const again = await example({ USAGE_CODE: '' });
    assert.match(again.stdout, /^usage queue: 0 waiting$/m);
    writeFileSync(path.join(queueDir(), savedName), saved);
    const resent = await example({ USAGE_CODE: '' });
    assert.match(resent.stdout, /^usage queue: 0 waiting$/m);
    assert.deepEqual(readdirSync(queueDir()), []);
    const final = await serverUsage();
    assert.equal(final.used, 3);
    assert.equal(final.reports.length, 3);
    console.log(`      (runs: online ${online.ms} ms, .lic ${fromFile.ms} ms, grace token ${fromToken.ms} ms, back online ${back.ms} ms)`);
  });

  it('derives the Node client\'s hardware ID, and fails with the Node client\'s codes and messages', async () => {
    // No HARDWARE_ID: each example derives one. Nothing listens on the port.
    const { HARDWARE_ID: _bound, ...derivedEnv } = env;
    const closed = { ...derivedEnv, LICENSE_SERVER: `127.0.0.1:${await freePort()}`, LICENSE_FILE: fixture.license.licenseFile, CACHE_DIR: path.join(work, 'cache-derived') };
    const go = await failing(binary, [], closed);
    const node = await failing(process.execPath, [nodeExample], closed);
    assert.equal(go.code, 1);
    assert.equal(node.code, 1);
    const derived = deriveHardwareId();
    assert.match(derived, /^hw2-[0-9a-f]{64}$/);
    assert.match(go.stdout, new RegExp(`^hardware ID: ${derived}$`, 'm'), 'the same derivation as the Node client on this machine');
    assert.match(go.stdout, /^offline mode: 0\.0 h of grace left$/m);
    // The .lic is bound to test-machine, and there is no grace token in a fresh cache.
    const expected =
      'license not valid: online: SERVER_UNREACHABLE (cannot reach the server (ECONNREFUSED)); ' +
      'license-file: HARDWARE_MISMATCH (hardware ID mismatch: failed to decrypt license key); ' +
      'grace-token: NO_GRACE_TOKEN (no usable grace token is cached)';
    assert.match(go.stdout, new RegExp(`^${expected.replace(/[()]/g, '\\$&')}$`, 'm'));
    assert.deepEqual(go.stdout.split('\n').filter(Boolean), node.stdout.split('\n').filter(Boolean), 'line for line what examples/check-license.mjs prints');
  });
});

/** A run that is expected to fail: its exit code and output. */
async function failing(file: string, args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string }> {
  try {
    await run(file, args, { env, timeout: 60_000 });
  } catch (error) {
    const { code, stdout } = error as { code: number; stdout: string };
    return { code, stdout };
  }
  throw new Error(`${file} succeeded`);
}

/** The doc's Go example is a whole program; it must build against clients/go as it stands. */
describe('docs/client.md, section Go', function () {
  this.timeout(120_000);
  before(requireGo);

  it('has a Go example that builds against clients/go, with the calls examples/go makes', () => {
    assert.ok(doc.includes('\n## Go\n'), 'docs/client.md has a "## Go" section');
    const section = doc.slice(doc.indexOf('\n## Go\n'));
    const code = /```go\n([\s\S]*?)```/.exec(section)?.[1];
    assert.ok(code, 'a go block in the Go section');
    const module = mkdtempSync(path.join(tmpdir(), 'license-go-doc-'));
    try {
      writeFileSync(path.join(module, 'go.mod'), `module doc.example/app\n\ngo 1.19\n\nrequire licenseserver.example/client v0.0.0\n\nreplace licenseserver.example/client => ${clientDir}\n`);
      writeFileSync(path.join(module, 'main.go'), code);
      const vet = spawnSync('go', ['vet', '.'], { cwd: module, env: goEnv, encoding: 'utf8' });
      assert.equal(vet.status, 0, vet.stderr);
      assert.equal(execFileSync('gofmt', ['-l', 'main.go'], { cwd: module, env: goEnv, encoding: 'utf8' }), '', 'gofmt-formatted, as Go code is read');
      const example = readFileSync(path.join(exampleDir, 'main.go'), 'utf8');
      for (const call of ['client.New(client.Config{', 'c.Validate()', 'result.HasEntitlement(', 'result.DecryptionKey', 'c.ReportUsage(', 'c.FlushUsageQueue()', 'defer c.Close()']) {
        assert.ok(code.includes(call), `the doc's example calls ${call}`);
        assert.ok(example.includes(call), `examples/go calls ${call}`);
      }
    } finally {
      rmSync(module, { recursive: true, force: true });
    }
  });
});
