// Compiles src/ to dist/, writes oclif.manifest.json (which lets the CLI answer --help and
// --version without importing every command module) and builds packages/client from dist/.
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildClientPackage } from './build-client-package.mjs';
import { bundleConsole } from './bundle-console.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = (name) => fileURLToPath(new URL(`../node_modules/.bin/${name}`, import.meta.url));
const run = (name, args, stdio) => {
  try {
    // The oclif dev tool would otherwise nag about its Node 22 majors on every build.
    execFileSync(bin(name), args, { cwd: root, stdio, env: { ...process.env, OCLIF_SKIP_NEW_VERSION_CHECK: 'true' } });
  } catch (error) {
    console.error(`build: ${name} ${args.join(' ')} failed`);
    process.exit(error.status ?? 1);
  }
};
rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
run('tsc', ['-p', 'tsconfig.json'], 'inherit');
// The console (src/console, Preact) is type-checked on its own (DOM, not Node) and bundled
// into one script beside the page's HTML and CSS: the daemon serves it with no CDN.
run('tsc', ['-p', 'src/console/tsconfig.json'], 'inherit');
await bundleConsole();
cpSync(new URL('../src/http/admin', import.meta.url), new URL('../dist/http/admin', import.meta.url), { recursive: true });
run('oclif', ['manifest'], ['ignore', 'ignore', 'inherit']);
buildClientPackage();

// oclif lists commands in the order their modules finished loading, which varies from run
// to run; sorted, the committed manifest only changes when a command does.
const manifestUrl = new URL('../oclif.manifest.json', import.meta.url);
const manifest = JSON.parse(readFileSync(manifestUrl, 'utf8'));
manifest.commands = Object.fromEntries(Object.entries(manifest.commands).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
writeFileSync(manifestUrl, `${JSON.stringify(manifest, null, 2)}\n`);
