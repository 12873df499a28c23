// Builds packages/client (the npm package `license-server-client`) from what tsc wrote to
// dist/: the modules the client reaches and their declarations, and nothing of the server.
// One implementation serves both module systems: `require` gets a CommonJS entry that
// loads the ES module (require(esm), Node >= 20.19), so there is never a second copy of
// the classes (instanceof LicenseClientConfigError holds whichever way it was loaded).
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = path.join(root, 'dist');
const out = path.join(root, 'packages', 'client', 'dist');

/** Files reached from `entry` through relative imports, static, dynamic and type-only (`import('./x.js')`). */
export function reachedFiles(entry) {
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.[^'"]+)['"]/g)) {
      const target = path.resolve(path.dirname(file), match[1]);
      visit(file.endsWith('.d.ts') ? target.replace(/\.js$/, '.d.ts') : target);
    }
  };
  visit(entry);
  return [...seen].sort();
}

export function buildClientPackage() {
  rmSync(out, { recursive: true, force: true });
  // The library, and the `license-server-client` command (package.json "bin").
  const files = [
    ...reachedFiles(path.join(dist, 'client', 'index.js')), ...reachedFiles(path.join(dist, 'client', 'index.d.ts')),
    ...reachedFiles(path.join(dist, 'client', 'cli.js')),
  ];
  for (const file of new Set(files)) {
    const relative = path.relative(dist, file);
    cpSync(file, path.join(out, 'esm', relative));
    // The same declarations, read as CommonJS ones under dist/cjs (its package.json says so).
    if (file.endsWith('.d.ts')) cpSync(file, path.join(out, 'cjs', relative));
  }
  mkdirSync(path.join(out, 'cjs', 'client'), { recursive: true });
  writeFileSync(path.join(out, 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
  writeFileSync(path.join(out, 'cjs', 'client', 'index.js'), "'use strict';\nmodule.exports = require('../../esm/client/index.js');\n");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) buildClientPackage();
