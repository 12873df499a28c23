import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const require = createRequire(import.meta.url);

/**
 * The postinstall on Node 20 where no prebuilt better-sqlite3 12 can be downloaded: run on a
 * copy of the package (without its binary) and the real prebuild-install, whose download host
 * is a closed port. The compiler step is pointed at a missing node-gyp, so that the test
 * stops where compiling (two minutes) would begin.
 */
describe('scripts/native-driver.mjs (postinstall)', function () {
  this.timeout(60_000);
  let work: string;
  before(function () {
    if (Number(process.versions.napi) >= 10) this.skip(); // Node 22 and 24 build nothing
    work = mkdtempSync(path.join(tmpdir(), 'license-native-driver-'));
  });
  after(() => work && rmSync(work, { recursive: true, force: true }));

  it('says in one line of its own that no prebuilt driver could be downloaded, and why, instead of prebuild-install\'s warning', () => {
    mkdirSync(path.join(work, 'scripts'));
    copyFileSync(path.join(root, 'scripts', 'native-driver.mjs'), path.join(work, 'scripts', 'native-driver.mjs'));
    const driver = path.join(work, 'node_modules', 'better-sqlite3-node20');
    mkdirSync(driver, { recursive: true });
    copyFileSync(require.resolve('better-sqlite3-node20/package.json'), path.join(driver, 'package.json'));
    symlinkSync(path.dirname(require.resolve('prebuild-install/package.json')), path.join(work, 'node_modules', 'prebuild-install'));
    const run = spawnSync(process.execPath, [path.join(work, 'scripts', 'native-driver.mjs')], {
      cwd: work,
      encoding: 'utf8',
      env: {
        ...process.env,
        npm_config_better_sqlite3_binary_host: 'http://127.0.0.1:1',
        npm_config_cache: path.join(work, 'npm-cache'),
        npm_config_node_gyp: path.join(work, 'no-node-gyp.js'),
      },
    });
    assert.equal(existsSync(path.join(driver, 'build')), false);
    const lines = run.stderr.split('\n').filter(Boolean);
    assert.ok(!/prebuild-install/.test(run.stderr), run.stderr);
    assert.match(lines[0]!, /^native-driver: no prebuilt better-sqlite3 12\.\d+\.\d+ for Node v20\.\d+\.\d+ could be downloaded \(.*ECONNREFUSED.*\): compiling it from source \(about two minutes; needs python3, make and a C\+\+ compiler\)$/);
    // Then node-gyp (here missing) fails, and the script says what a build needs.
    assert.equal(run.status, 1);
    assert.match(run.stderr, /^native-driver: building better-sqlite3 for Node 20 failed; it needs python3, make and a C\+\+ compiler/m);
  });
});
