// Runs after `npm install` / `npm ci` (postinstall). better-sqlite3 13 carries prebuilt
// Node-API binaries and needs nothing here; Node 20 cannot load them (Node-API 9), so on
// Node 20 only, better-sqlite3 12 (installed as better-sqlite3-node20, its own install
// script denied in package.json so Node 22 and 24 do not spend two minutes compiling what
// they never load) is built: a prebuilt download when one is reachable, else from source
// against this Node's headers. See src/lib/storage/sqlite-driver.ts.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

// --check: does the driver this Node will use load? (CI asks before each Node's run.)
if (process.argv.includes('--check')) {
  const driver = Number(process.versions.napi) >= 10 ? 'better-sqlite3' : 'better-sqlite3-node20';
  try {
    const Database = require(driver);
    new Database(':memory:').close();
    process.exit(0);
  } catch (error) {
    console.error(`native-driver: ${driver} does not load on Node ${process.version}: ${error.message}`);
    process.exit(1);
  }
}
if (Number(process.versions.napi) >= 10) process.exit(0);
let dir;
try {
  dir = path.dirname(require.resolve('better-sqlite3-node20/package.json'));
} catch {
  console.error('native-driver: better-sqlite3-node20 is not installed; Node 20 needs it (npm install without --omit=optional)');
  process.exit(1);
}
if (existsSync(path.join(dir, 'build', 'Release', 'better_sqlite3.node'))) process.exit(0);

const run = (command, args) => spawnSync(command, args, { cwd: dir, stdio: 'inherit', env: process.env }).status === 0;
const prebuild = (() => {
  try {
    return require.resolve('prebuild-install/bin.js', { paths: [dir] });
  } catch {
    return undefined;
  }
})();
// npm sets npm_config_node_gyp to its bundled node-gyp while it runs lifecycle scripts.
const nodeGyp = process.env.npm_config_node_gyp;
const version = require(path.join(dir, 'package.json')).version;
let unreachable = 'prebuild-install is missing';
if (prebuild) {
  // Its own warning ("prebuild-install warn install getaddrinfo ENOTFOUND github.com") reads
  // like a failed install; the install goes on, so it is said once, in our words, below.
  const download = spawnSync(process.execPath, [prebuild], { cwd: dir, env: process.env, encoding: 'utf8' });
  if (download.status === 0) process.exit(0);
  const said = `${download.stderr ?? ''}\n${download.stdout ?? ''}`.split('\n').map((line) => line.replace(/^prebuild-install (warn|err!?|info) (install )?/, '').trim()).filter(Boolean);
  unreachable = said.at(-1) ?? `prebuild-install exited with ${download.status ?? download.signal}`;
}
console.error(`native-driver: no prebuilt better-sqlite3 ${version} for Node ${process.version} could be downloaded (${unreachable}): compiling it from source (about two minutes; needs python3, make and a C++ compiler)`);
if (nodeGyp && run(process.execPath, [nodeGyp, 'rebuild', '--release'])) process.exit(0);
if (!nodeGyp && run('npx', ['--no-install', 'node-gyp', 'rebuild', '--release'])) process.exit(0);
console.error('native-driver: building better-sqlite3 for Node 20 failed; it needs python3, make and a C++ compiler (or use Node 22 or 24, which need none)');
process.exit(1);
