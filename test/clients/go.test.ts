import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { fileURLToPath } from 'node:url';
import { deriveHardwareId, deriveHardwareIdV1 } from '../../src/client/hardware-id.js';

const moduleDir = fileURLToPath(new URL('../../clients/go/', import.meta.url));
// Go from Debian's golang-go, the standard library only: nothing may be downloaded.
const env = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

/** The Go client's own tests (clients/go), run against the vectors in test/vectors. */
describe('the Go client (clients/go)', function () {
  this.timeout(600_000);

  before(function () {
    if (spawnSync('go', ['version'], { env }).status === 0) return;
    // Under CI the toolchain is installed by .ci/run: its absence is a failure, not a skip.
    if (process.env.CI === 'true') throw new Error('go is not installed (Debian package golang-go)');
    this.skip();
  });

  it('builds with the standard library alone and passes go vet and go test', () => {
    const listed = execFileSync('go', ['list', '-deps', '-f', '{{if not .Standard}}{{.ImportPath}}{{end}}', './...'], { cwd: moduleDir, env, encoding: 'utf8' });
    const own = execFileSync('go', ['list', '-m'], { cwd: moduleDir, env, encoding: 'utf8' }).trim();
    const foreign = listed.split('\n').filter((line) => line !== '' && !line.startsWith(own));
    assert.deepEqual(foreign, [], 'only the standard library and the module itself');
    execFileSync('go', ['vet', './...'], { cwd: moduleDir, env, stdio: 'pipe' });
    const result = spawnSync('go', ['test', './...'], { cwd: moduleDir, env, encoding: 'utf8' });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.match(result.stdout, /^ok\s/m);
    assert.doesNotMatch(result.stdout, /^(FAIL|---\s*FAIL)/m);
  });

  it('lists the network interfaces os.networkInterfaces() lists on this machine, and derives the same hw1 ID', () => {
    const names = Object.keys(networkInterfaces()).sort().join(',');
    // The CPU model is read alike on x86-64 Linux only (clients/go/README.md).
    const sameSources = process.platform === 'linux' && process.arch === 'x64';
    const result = spawnSync('go', ['test', '-count=1', '-run', '^TestSameInterfacesAndIDAsNodeOnThisMachine$', '-v', './hardwareid/'], {
      cwd: moduleDir,
      env: { ...env, LICENSE_NODE_INTERFACES: names, LICENSE_NODE_HARDWARE_ID: sameSources ? deriveHardwareIdV1() : '' },
      encoding: 'utf8',
    });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.match(result.stdout, /^--- PASS: TestSameInterfacesAndIDAsNodeOnThisMachine/m);
  });

  it('derives the same default (hw2-) hardware ID as the Node client on this machine', () => {
    const node = deriveHardwareId();
    const result = spawnSync('go', ['test', '-count=1', '-run', '^TestSameV2IDAsNodeOnThisMachine$', '-v', './hardwareid/'], {
      cwd: moduleDir,
      env: { ...env, LICENSE_NODE_HARDWARE_ID_V2: node },
      encoding: 'utf8',
    });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.match(result.stdout, /^--- PASS: TestSameV2IDAsNodeOnThisMachine/m);
    if (process.platform === 'linux') assert.match(node, /^hw2-[0-9a-f]{64}$/);
  });
});
