import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI, ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

const moduleDir = fileURLToPath(new URL('../../clients/go/', import.meta.url));
// Go from Debian's golang-go, the standard library only: nothing may be downloaded.
const goEnv = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

/**
 * The Go client's activation by request file (clients/go/activation_server_test.go) with
 * the real command line on each engine: request, `license checkout --request`, install,
 * offline validation, and install's refusals.
 */
forEachEngine('the Go client: activation by request file against license checkout --request', (fixture) => {
  let work: string;
  let env: Record<string, string>;

  before(async function () {
    this.timeout(60_000);
    if (spawnSync('go', ['version'], { env: goEnv }).status !== 0) {
      if (process.env.CI === 'true') throw new Error('go is not installed (Debian package golang-go)');
      this.skip();
    }
    work = mkdtempSync(path.join(tmpdir(), 'license-go-activation-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Air-gapped Works', '--json')).json();
    const license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--max-machines', '3', '--with-decryption-key', '--json')).json();
    env = {
      ...env,
      AR_WORK: work,
      AR_NODE: process.execPath,
      AR_CLI: CLI,
      AR_DATABASE_URL: env.LICENSE_DATABASE_URL!,
      AR_LICENSE_KEY: license.key,
      AR_LICENSE_ID: license.id,
      AR_PUBLIC_KEY: ok(await cli('signing-key', 'show')).stdout,
    };
  });
  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('passes TestActivationAgainstServer', function () {
    this.timeout(600_000);
    const result = spawnSync('go', ['test', '-count=1', '-run', '^TestActivationAgainstServer$', '-v', '.'], { cwd: moduleDir, env: { ...goEnv, ...env }, encoding: 'utf8' });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.match(result.stdout, /^--- PASS: TestActivationAgainstServer/m);
    assert.doesNotMatch(result.stdout, /--- SKIP/);
  });
});
