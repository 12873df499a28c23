import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { LicenseFixture } from '../support/license-fixture.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const packageDir = path.join(root, 'packages', 'client');
const DEPENDENCIES = ['@noble/ciphers', '@noble/curves', '@noble/hashes', 'canonicalize'];

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)));
}

function sizeOf(dir: string): number {
  return filesUnder(dir).reduce((total, file) => total + statSync(path.join(dir, file)).size, 0);
}

/** The installed packages of a node_modules tree, as `name@version`. */
function installedPackages(nodeModules: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(nodeModules)) {
    if (entry.startsWith('.')) continue;
    const names = entry.startsWith('@') ? readdirSync(path.join(nodeModules, entry)).map((name) => `${entry}/${name}`) : [entry];
    for (const name of names) {
      const manifest = JSON.parse(readFileSync(path.join(nodeModules, name, 'package.json'), 'utf8'));
      found.push(`${name}@${manifest.version}`);
      if (existsSync(path.join(nodeModules, name, 'node_modules'))) found.push(...installedPackages(path.join(nodeModules, name, 'node_modules')));
    }
  }
  return found.sort();
}

const npm = (args: string[], cwd: string) => run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, env: { ...process.env, npm_config_update_notifier: 'false' } });

/**
 * The client package as an application gets it: packed with npm pack, installed from the
 * tarball into a project outside this repository with npm's --offline (the only other
 * tarballs on hand are its four dependencies, packed from our node_modules: a fifth
 * dependency, or a native build, would fail the install), then used from ESM, CommonJS
 * and TypeScript against a real serve.
 */
describe('the client package (packages/client, license-server-client) installed from its tarball', function () {
  this.timeout(300_000);
  let scratch: string;
  let project: string;
  let fixture: LicenseFixture;
  let env: Record<string, string>;

  before(async () => {
    assert.ok(existsSync(path.join(packageDir, 'dist', 'esm', 'client', 'index.js')), 'run the build first (npm test does)');
    scratch = mkdtempSync(path.join(tmpdir(), 'license-client-package-'));
    const tarballs = path.join(scratch, 'tarballs');
    mkdirSync(tarballs);
    const packed = JSON.parse((await npm(['pack', '--json', '--pack-destination', tarballs], packageDir)).stdout);
    for (const name of DEPENDENCIES) await npm(['pack', '--pack-destination', tarballs, path.join(root, 'node_modules', name)], scratch);
    project = path.join(scratch, 'app');
    mkdirSync(project);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'vendor-app', version: '1.0.0', private: true }));
    const all = readdirSync(tarballs).map((file) => path.join(tarballs, file));
    assert.equal(all.length, DEPENDENCIES.length + 1);
    assert.ok(all.some((file) => path.basename(file) === packed[0].filename));
    await npm(['install', '--offline', ...all], project);

    fixture = await LicenseFixture.start();
    writeFileSync(path.join(scratch, 'signing-key.pem'), fixture.pem);
    env = {
      ...process.env,
      LICENSE_SERVER: fixture.addr,
      LICENSE_KEY: fixture.license.key,
      PUBLIC_KEY_FILE: path.join(scratch, 'signing-key.pem'),
      LICENSE_FILE: fixture.license.licenseFile,
      HARDWARE_ID: 'test-machine',
      USAGE_CODE: 'seats',
    } as Record<string, string>;
  });
  after(async () => {
    await fixture?.cleanup();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('installs five packages, none with native code or install scripts, and declares the dependencies it uses', () => {
    const nodeModules = path.join(project, 'node_modules');
    const installed = installedPackages(nodeModules);
    assert.deepEqual(installed.map((entry) => entry.slice(0, entry.lastIndexOf('@'))), [...DEPENDENCIES, 'license-server-client'].sort());
    for (const file of filesUnder(nodeModules)) {
      assert.ok(!file.endsWith('.node') && path.basename(file) !== 'binding.gyp', `no native code: ${file}`);
    }
    for (const entry of installed) {
      const name = entry.slice(0, entry.lastIndexOf('@'));
      const scripts = JSON.parse(readFileSync(path.join(nodeModules, name, 'package.json'), 'utf8')).scripts ?? {};
      for (const hook of ['preinstall', 'install', 'postinstall']) assert.equal(scripts[hook], undefined, `${name} has no ${hook} script`);
    }
    // Every bare import of the package's own code is a Node built-in or a declared dependency.
    const installedClient = path.join(nodeModules, 'license-server-client');
    const manifest = JSON.parse(readFileSync(path.join(installedClient, 'package.json'), 'utf8'));
    assert.deepEqual(Object.keys(manifest.dependencies).sort(), DEPENDENCIES);
    const rootManifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    for (const name of DEPENDENCIES) assert.equal(manifest.dependencies[name], rootManifest.dependencies[name], `${name}: the range the server is tested with`);
    const bare = new Set<string>();
    for (const file of filesUnder(installedClient).filter((name) => name.endsWith('.js'))) {
      for (const match of readFileSync(path.join(installedClient, file), 'utf8').matchAll(/(?:from\s+|import\s*\(\s*|import\s+|require\()\s*['"]([^.'"][^'"]*)['"]/g)) {
        const specifier = match[1]!;
        bare.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!);
      }
    }
    const foreign = [...bare].filter((name) => !name.startsWith('node:') && !builtinModules.includes(name)).sort();
    assert.deepEqual(foreign, DEPENDENCIES);
    const size = sizeOf(nodeModules);
    console.log(`      client-only install: ${installed.join(', ')}; ${(size / 1024).toFixed(0)} KiB in node_modules (package ${(sizeOf(installedClient) / 1024).toFixed(0)} KiB)`);
  });

  it('runs the example of docs/client.md from ESM, online and then offline', async () => {
    const source = readFileSync(path.join(root, 'examples', 'check-license.mjs'), 'utf8');
    assert.equal(source.split("from 'license-server/client'").length, 2, 'the example imports license-server/client once');
    writeFileSync(path.join(project, 'check-license.mjs'), source.replace("from 'license-server/client'", "from 'license-server-client'"));
    const cacheDir = path.join(scratch, 'cache-esm');
    const online = await run(process.execPath, ['check-license.mjs'], { cwd: project, env: { ...env, CACHE_DIR: cacheDir } });
    assert.match(online.stdout, /^license valid \(online\)$/m);
    assert.match(online.stdout, /^entitlements: export, seats$/m);
    assert.match(online.stdout, /^decryption key: available \(32 bytes\)$/m);
    assert.match(online.stdout, /^usage counted, \d+ left$/m);
    assert.equal(online.stderr, '', 'no warning (e.g. an ExperimentalWarning)');
    await fixture.stopServer();
    try {
      const offline = await run(process.execPath, ['check-license.mjs'], { cwd: project, env: { ...env, CACHE_DIR: cacheDir } });
      assert.match(offline.stdout, /^license valid \(offline, from the license-file\)$/m);
      assert.match(offline.stdout, /^entitlements: export \(restricted offline\), seats$/m);
      assert.match(offline.stdout, /^usage queued until the server is back$/m);
    } finally {
      await fixture.startServer();
    }
  });

  it('works from CommonJS require, with one copy of its classes, online and offline', async () => {
    writeFileSync(path.join(project, 'check.cjs'), [
      "const { readFileSync } = require('node:fs');",
      "const client = require('license-server-client');",
      "const esmEntry = require.resolve('license-server-client');",
      'const c = new client.LicenseClient({',
      '  serverAddr: process.env.LICENSE_SERVER, licenseKey: process.env.LICENSE_KEY, version: "1.0.0", hardwareId: "test-machine",',
      '  offline: { enabled: true, licenseFile: process.env.LICENSE_FILE, publicKey: readFileSync(process.env.PUBLIC_KEY_FILE, "utf8"), cacheDir: process.env.CACHE_DIR },',
      '});',
      'c.validate().then(async (result) => {',
      '  let configError = "none";',
      '  try { new client.LicenseClient({}); } catch (error) { configError = error instanceof client.LicenseClientConfigError ? "LicenseClientConfigError" : String(error); }',
      '  const esm = await import("license-server-client");',
      '  console.log(JSON.stringify({ valid: result.valid, source: result.source, key: result.decryptionKey?.length, configError, same: esm.LicenseClient === client.LicenseClient, entry: esmEntry }));',
      '  c.close();',
      '});',
    ].join('\n'));
    const cacheDir = path.join(scratch, 'cache-cjs');
    const online = await run(process.execPath, ['check.cjs'], { cwd: project, env: { ...env, CACHE_DIR: cacheDir } });
    const answer = JSON.parse(online.stdout);
    assert.deepEqual({ ...answer, entry: undefined }, { valid: true, source: 'online', key: 32, configError: 'LicenseClientConfigError', same: true, entry: undefined });
    assert.match(answer.entry, /dist[\\/]cjs[\\/]client[\\/]index\.js$/, 'require took the CommonJS entry');
    assert.equal(online.stderr, '', 'no warning (e.g. an ExperimentalWarning)');
    await fixture.stopServer();
    try {
      const offline = JSON.parse((await run(process.execPath, ['check.cjs'], { cwd: project, env: { ...env, CACHE_DIR: cacheDir } })).stdout);
      assert.equal(offline.valid, true);
      assert.equal(offline.source, 'license-file');
    } finally {
      await fixture.startServer();
    }
  });

  describe('TypeScript types', () => {
    const consumer = [
      "import { LicenseClient, LicenseClientConfigError, type ValidationResult } from 'license-server-client';",
      "const client = new LicenseClient({ licenseKey: 'K', version: '1', offline: { enabled: true, licenseFile: 'a.lic', publicKey: 'pem' } });",
      'export async function check(): Promise<boolean> {',
      '  const result: ValidationResult = await client.validate();',
      "  const source: 'online' | 'license-file' | 'grace-token' | undefined = result.source;",
      '  void source;',
      '  // @ts-expect-error: not an option (the types are real, not any)',
      "  new LicenseClient({ licenseKey: 'K', version: '1', serverAdress: 'x:1' });",
      '  // @ts-expect-error: valid is a boolean',
      '  const wrong: string = result.valid;',
      '  void wrong;',
      '  return result.valid && !(result as unknown instanceof LicenseClientConfigError);',
      '}',
    ].join('\n');
    const cases: Array<{ name: string; type: 'module' | 'commonjs'; module: string; moduleResolution: string; file: string }> = [
      { name: 'ESM, node16', type: 'module', module: 'node16', moduleResolution: 'node16', file: 'check.ts' },
      { name: 'CommonJS, node16', type: 'commonjs', module: 'node16', moduleResolution: 'node16', file: 'check.ts' },
      { name: 'ESM, nodenext', type: 'module', module: 'nodenext', moduleResolution: 'nodenext', file: 'check.ts' },
      { name: 'CommonJS (.cts), nodenext', type: 'module', module: 'nodenext', moduleResolution: 'nodenext', file: 'check.cts' },
      { name: 'bundler', type: 'module', module: 'esnext', moduleResolution: 'bundler', file: 'check.ts' },
    ];
    for (const { name, type, module, moduleResolution, file } of cases) {
      it(`type-check under ${name}`, async () => {
        const dir = path.join(project, `ts-${name.replace(/\W+/g, '-')}`);
        mkdirSync(dir);
        writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type }));
        writeFileSync(path.join(dir, file), consumer);
        writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
          compilerOptions: {
            module, moduleResolution, target: 'es2022', strict: true, noEmit: true, skipLibCheck: false,
            types: ['node'], typeRoots: [path.join(root, 'node_modules', '@types')],
          },
          files: [file],
        }));
        const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
        const result = await run(tsc, ['-p', dir, '--traceResolution'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 }).catch((error) => error);
        assert.equal(result.code ?? 0, 0, `${result.stdout.split('\n').filter((line: string) => /error TS/.test(line)).join('\n')}`);
        const resolved = String(result.stdout).match(/Module name 'license-server-client' was successfully resolved to '([^']+)'/)?.[1];
        const expected = type === 'commonjs' || file.endsWith('.cts') ? 'cjs' : 'esm';
        assert.ok(resolved?.includes(`/dist/${expected}/client/index.d.ts`), `resolved to ${resolved}`);
      });
    }
  });
});

/**
 * The `npm pack` lines the docs give, run as written from the repository's root (with
 * --dry-run, so nothing is written there): npm reads `packages/client` as a GitHub
 * shorthand (github.com/packages/client), so only `./packages/client` packs this package.
 */
describe('the npm pack lines of README.md, docs/client.md and packages/client/README.md', function () {
  this.timeout(120_000);
  const documents = ['README.md', 'docs/client.md', 'packages/client/README.md'];
  const lines = documents.flatMap((document) => [...readFileSync(path.join(root, document), 'utf8').matchAll(/`(npm pack [^`]*)`/g)].map((match) => ({ document, line: match[1]! })));

  it('finds a line in each document', () => {
    assert.deepEqual([...new Set(lines.map((entry) => entry.document))], documents);
  });

  for (const document of documents) {
    it(`packs license-server-client with each line of ${document}`, async () => {
      for (const { line } of lines.filter((entry) => entry.document === document)) {
        const args = line.split(/\s+/).slice(1);
        const packed = await npm([...args, '--dry-run', '--json'], root).catch((error: { stderr?: string }) => assert.fail(`${line}: ${error.stderr ?? String(error)}`));
        assert.equal(JSON.parse(packed.stdout)[0].name, 'license-server-client', line);
      }
    });
  }
});
