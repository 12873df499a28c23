import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../../dist/lib/', import.meta.url));

/** Every package a module pulls in, following relative imports (static and dynamic) through dist/. */
function packagesReachedFrom(entry: string): Set<string> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"]([^'"]+)['"]/g)) {
      const specifier = match[1]!;
      if (specifier.startsWith('.')) visit(path.resolve(path.dirname(file), specifier));
      else packages.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!);
    }
  };
  visit(entry);
  return packages;
}

describe('code the client library embeds is free of server-only code', () => {
  it('license-server/client reaches only Node built-ins, @noble and canonicalize', () => {
    const entry = path.join(dist, '..', 'client', 'index.js');
    assert.ok(existsSync(entry), 'run the build first (npm test does)');
    const reached = [...packagesReachedFrom(entry)].filter((name) => !name.startsWith('node:')).sort();
    assert.deepEqual(reached, ['@noble/ciphers', '@noble/curves', '@noble/hashes', 'canonicalize']);
  });

  it('the package\'s command (license-server-client) reaches only Node built-ins, @noble and canonicalize', () => {
    const entry = path.join(dist, '..', 'client', 'cli.js');
    assert.ok(existsSync(entry), 'run the build first (npm test does)');
    const reached = [...packagesReachedFrom(entry)].filter((name) => !name.startsWith('node:')).sort();
    // @noble/ciphers: install opens a machine-key file's key (HPKE's AES-256-GCM) to check it.
    assert.deepEqual(reached, ['@noble/ciphers', '@noble/curves', '@noble/hashes', 'canonicalize']);
    assert.match(readFileSync(entry, 'utf8'), /^#!\/usr\/bin\/env node\n/, 'runnable as the package\'s bin');
  });

  it('the package exports it as license-server/client, to import and to require', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    assert.equal(manifest.exports['./client'].default, './dist/client/index.js');
    // A package may name itself: this resolves through the exports map as an application's require would.
    const required = execFileSync(process.execPath, ['-e', "console.log(typeof require('license-server/client').LicenseClient)"], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      encoding: 'utf8',
    });
    assert.equal(required.trim(), 'function');
  });

  it('offline verification reaches only Node built-ins, @noble and canonicalize', () => {
    const entry = path.join(dist, 'offline', 'verify.js');
    assert.ok(existsSync(entry), 'run the build first (npm test does)');
    const reached = [...packagesReachedFrom(entry)].filter((name) => !name.startsWith('node:')).sort();
    assert.deepEqual(reached, ['@noble/ciphers', '@noble/curves', '@noble/hashes', 'canonicalize']);
  });
});
