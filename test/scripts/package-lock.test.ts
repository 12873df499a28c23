import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

interface LockEntry {
  readonly hasInstallScript?: boolean;
  readonly link?: boolean;
}

/**
 * npm records in package-lock.json which packages run a script at install. When the committed
 * file says otherwise, `npm install` in a fresh clone rewrites it, and the clone starts dirty.
 * npm's rule: a preinstall, install or postinstall script, or a binding.gyp. The registry
 * counts binding.gyp even where the package says `"gypfile": false` (better-sqlite3 13 does,
 * and npm install records it with an install script all the same).
 */
function runsAnInstallScript(dir: string): boolean {
  const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  const scripts = manifest.scripts ?? {};
  if (scripts.preinstall || scripts.install || scripts.postinstall) return true;
  return existsSync(path.join(dir, 'binding.gyp'));
}

describe('package-lock.json', () => {
  it('says of every installed package whether it runs an install script, as npm install would write it', function () {
    const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
    const wrong: string[] = [];
    let checked = 0;
    for (const [where, entry] of Object.entries(lock.packages)) {
      if (!where.startsWith('node_modules/') || entry.link) continue;
      const dir = path.join(root, where);
      if (!existsSync(path.join(dir, 'package.json'))) continue; // an optional package of another platform
      checked += 1;
      if (runsAnInstallScript(dir) !== (entry.hasInstallScript === true)) wrong.push(`${where}: hasInstallScript ${entry.hasInstallScript === true}, installed package ${runsAnInstallScript(dir)}`);
    }
    assert.ok(checked > 100, `only ${checked} installed packages found: is node_modules installed?`);
    assert.deepEqual(wrong, []);
  });
});
