import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { CLI, ok, runCli } from '../support/cli.js';

/** The README is a contract too: its blocks run as written, and its claims about commands hold. */
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const root = fileURLToPath(new URL('../..', import.meta.url));

/** The first fenced block of `language` after the line that contains `after`. */
function block(after: string, language: string): string {
  const start = readme.indexOf(after);
  assert.ok(start >= 0, `README has "${after}"`);
  const match = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``).exec(readme.slice(start));
  assert.ok(match, `a ${language} block after "${after}"`);
  return match[1]!;
}

function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) env[name] = value;
  return { ...env, ...extra };
}

describe('README.md', () => {
  let work: string;
  beforeEach(() => (work = mkdtempSync(path.join(tmpdir(), 'license-readme-'))));
  afterEach(() => rmSync(work, { recursive: true, force: true }));

  it('runs the machines block as written: a limited license, a checked-out machine, an update, a renewal, a scoped token', async () => {
    const lifecycle = block('A license can limit how many machines use it at once', 'sh');
    ok(await runCli(['init'], { cwd: work }));
    const script = `npx() { if [ "$1" = license-server ]; then shift; fi; node ${JSON.stringify(CLI)} "$@"; }\n${lifecycle}`;
    const run = spawnSync('sh', ['-eu', '-c', script], { cwd: work, env: cleanEnv({}), encoding: 'utf8' });
    assert.equal(run.status, 0, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
    assert.match(run.stdout, /LAPTOP-7/, 'machine list shows the checked-out machine');
    const [license] = ok(await runCli(['license', 'list', '--json'], { cwd: work })).json();
    assert.equal(license.max_machines, 5);
    assert.deepEqual(license.metadata, { crm_id: 'AC-1042' });
    assert.equal(license.valid_until, new Date(Date.parse('2100-01-01T00:00:00.000Z') + 365 * 86_400_000).toISOString());
    assert.equal(license.machines_in_use, 1);
    assert.equal(readdirSync(work).filter((name) => name.endsWith('.lic')).length, 1);
    const [token] = ok(await runCli(['token', 'list', '--json'], { cwd: work })).json();
    assert.deepEqual([token.name, token.scopes], ['billing-sync', ['read', 'licenses']]);
  });

  it('sets up a license with the setup block, run as a shell script on a fresh store', async () => {
    const setup = block('Then set up what a license needs', 'sh');
    ok(await runCli(['init'], { cwd: work }));
    // `npx license-server` is the built CLI of this checkout, exactly as after `npm install`.
    const script = `npx() { if [ "$1" = license-server ]; then shift; fi; node ${JSON.stringify(CLI)} "$@"; }\n${setup}`;
    const run = spawnSync('sh', ['-eu', '-c', script], { cwd: work, env: cleanEnv({}), encoding: 'utf8' });
    assert.equal(run.status, 0, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
    const [license] = ok(await runCli(['license', 'list', '--json'], { cwd: work })).json();
    assert.deepEqual(
      license.entitlements.map((e: { code: string; usage_limit: number | null }) => [e.code, e.usage_limit]),
      [['reports.export', null], ['seats', 25]],
    );
    assert.equal(license.has_decryption_key, true);
    const [customer] = ok(await runCli(['customer', 'list', '--json'], { cwd: work })).json();
    assert.equal(license.customer_id, customer.id);
    assert.equal(customer.name, 'Acme GmbH');
  });

  it('is right about license show --reveal-decryption-key: 64 lowercase hex digits, the 32 bytes a bound .lic file unseals', async () => {
    const row = readme.split('\n').find((line) => line.includes('`show ID-OR-KEY [--reveal-decryption-key]`'))!;
    assert.match(row, /as 64 lowercase hex digits: a line `decryption key: <hex>` \(`-` without one\), with `--json` the member `"decryption_key"` \(`null` without one\)/);
    const cli = (...args: string[]) => runCli(args, { cwd: work });
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Hex')).stdout.trim();
    const keyed = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--with-decryption-key', '--json')).json();
    const plain = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--json')).json();
    const hex = ok(await cli('license', 'show', keyed.id, '--reveal-decryption-key', '--json')).json().decryption_key;
    assert.match(hex, /^[0-9a-f]{64}$/);
    assert.match(ok(await cli('license', 'show', keyed.id, '--reveal-decryption-key')).stdout, new RegExp(`^decryption key: ${hex}$`, 'm'));
    assert.equal(ok(await cli('license', 'show', plain.id, '--reveal-decryption-key', '--json')).json().decryption_key, null);
    assert.match(ok(await cli('license', 'show', plain.id, '--reveal-decryption-key')).stdout, /^decryption key: -$/m);
    ok(await cli('license', 'checkout', keyed.id, '--ttl-days', '1', '--hardware-id', 'hw-1', '--out', 'bound.lic'));
    const verified = verifyLicenseFile(readFileSync(path.join(work, 'bound.lic'), 'utf8'), { publicKey: ok(await cli('signing-key', 'show')).stdout, hardwareId: 'hw-1' });
    assert.equal(Buffer.from(verified.decryptionKey!).toString('hex'), hex);
  });

  it('is right that customer create prints the id alone off a terminal, and the record on one', async () => {
    ok(await runCli(['init'], { cwd: work }));
    const piped = ok(await runCli(['customer', 'create', '--name', 'Piped'], { cwd: work }));
    assert.match(piped.stdout, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$/);
    // script(1) gives the command a terminal for its standard output.
    const onTerminal = spawnSync('script', ['-qec', `node ${JSON.stringify(CLI)} customer create --name Terminal`, '/dev/null'], {
      cwd: work,
      env: cleanEnv({}),
      encoding: 'utf8',
    });
    assert.equal(onTerminal.status, 0, onTerminal.stdout + onTerminal.stderr);
    assert.match(onTerminal.stdout, /^Created customer: [0-9a-f-]{36}\r?\nname: +Terminal\r?\nactive: +yes/m);
  });

  it('is right that every command but serve takes --json', () => {
    assert.match(readme.replace(/\s+/g, ' '), /every command but `serve` \([^)]*\) takes `--json`/);
    const manifest = JSON.parse(readFileSync(path.join(root, 'oclif.manifest.json'), 'utf8'));
    const without = Object.entries(manifest.commands as Record<string, { flags: Record<string, unknown> }>)
      .filter(([, command]) => !('json' in command.flags))
      .map(([id]) => id);
    assert.deepEqual(without, ['serve']);
  });

  it('is right that license checkout --out - and --json cannot be combined: a usage error, exit 2, nothing checked out', async () => {
    const row = readme.split('\n').find((line) => line.startsWith('| `license checkout '));
    assert.ok(row, 'README has the license checkout row');
    assert.match(row, /`--out -`[^|]*cannot be combined with `--json`[^|]*\(`USAGE`, exit 2\)/);
    const env = { LICENSE_DATA_DIR: path.join(work, 'data') };
    ok(await runCli(['init'], { env, cwd: work }));
    const customer = ok(await runCli(['customer', 'create', '--name', 'Stdout Ltd'], { env, cwd: work })).stdout.trim();
    const license = ok(await runCli(['license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31'], { env, cwd: work })).stdout.trim();
    const both = await runCli(['license', 'checkout', license, '--ttl-days', '30', '--out', '-', '--json'], { env, cwd: work });
    assert.equal(both.code, 2, both.stderr);
    assert.equal(both.json().error.code, 'USAGE');
    const audit = ok(await runCli(['audit', 'list', '--action', 'license.checked_out', '--json'], { env, cwd: work })).json();
    assert.deepEqual(audit.items ?? audit, [], 'no checkout was audited');
  });

  it('is right that serve refuses --json, as a usage error', async () => {
    const refused = await runCli(['serve', '--json'], { cwd: work });
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /^Error: Nonexistent flag: --json \(USAGE\)$/m);
    assert.deepEqual(readdirSync(work), [], 'and starts nothing');
  });

  it('starts the daemon with the quick start\'s first command, and SIGTERM or Ctrl-C (SIGINT) to that process stops it with exit 0', async () => {
    const [first, second, ...more] = block('## Quick start', 'sh').trim().split('\n');
    assert.deepEqual([second, more], ['npm test', []], 'two commands');
    const daemon = /^npm install && (\S+) serve$/.exec(first!)?.[1];
    assert.ok(daemon && !daemon.includes('npx'), `the daemon's own process, not npx: ${first}`);
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      // As the shell runs it after npm install: from the clone, the program itself (its
      // #! line starts node in the same process); the data directory and port are the test's.
      const child = spawn(path.resolve(root, daemon), ['serve'], {
        cwd: root,
        env: cleanEnv({ LICENSE_DATA_DIR: path.join(work, 'data'), LICENSE_PORT: '0', LICENSE_BACKUP_ENABLED: 'false' }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', () => /^admin token/m.test(out) && resolve());
        void exited.then((code) => reject(new Error(`serve exited with ${code}: ${out}${err}`)));
      });
      const url = /listening on (\S+)/.exec(out)![1]!;
      child.kill(signal);
      assert.equal(await exited, 0, `${signal}: ${err}`);
      assert.match(err, new RegExp(`"msg":"shutting down","signal":"${signal}"`));
      await assert.rejects(fetch(`${url}/healthz`), 'nothing listens any more');
    }
  });

  it('explains the warnings that npm install prints on Node 20 before they appear', () => {
    const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('Then set up what a license needs'));
    const driver = JSON.parse(readFileSync(path.join(root, 'node_modules', 'better-sqlite3', 'package.json'), 'utf8'));
    assert.equal(driver.engines.node, '>=22', 'npm warns EBADENGINE for it on Node 20');
    assert.match(quickStart, new RegExp(`EBADENGINE Unsupported engine\` for \`better-sqlite3@${driver.version.split('.')[0]}\``));
    assert.ok(quickStart.includes(`required: { node: '${driver.engines.node}' }`));
    // The one line scripts/native-driver.mjs prints instead of prebuild-install's warning.
    const script = readFileSync(path.join(root, 'scripts', 'native-driver.mjs'), 'utf8');
    assert.ok(script.includes('native-driver: no prebuilt better-sqlite3 ${version} for Node ${process.version} could be downloaded ('));
    assert.match(quickStart.replace(/\s+/g, ' '), /`native-driver: no prebuilt better-sqlite3 \.\.\. could be downloaded \(getaddrinfo ENOTFOUND github\.com\): compiling it from source`/);
  });

  it('starts the daemon as its systemd unit says, and the unit\'s SIGTERM stops it with exit 0', async () => {
    const unit = block('Running under a supervisor', 'ini');
    const envFile = block('/etc/license-server/env', 'sh');
    const execStart = /^ExecStart=(.+)$/m.exec(unit)![1]!.split(' ');
    assert.deepEqual(execStart.slice(1), ['/opt/license-server/bin/run.js', 'serve'], 'node runs the bin itself, not npx');
    const env: Record<string, string> = {};
    for (const line of envFile.split('\n')) {
      const match = /^(LICENSE_\w+)=(.*)$/.exec(line);
      if (match && match[1] !== 'LICENSE_BACKUP_ENCRYPTION_KEY') env[match[1]!] = match[2]!;
    }
    assert.equal(env.LICENSE_DATA_DIR, '/var/lib/license-server');
    // The clone is this checkout; the data directory and the address are the test's own.
    const child = spawn(process.execPath, [path.join(root, 'bin', 'run.js'), 'serve'], {
      cwd: '/',
      env: cleanEnv({ ...env, LICENSE_DATA_DIR: path.join(work, 'data'), LICENSE_HOST: '127.0.0.1', LICENSE_PORT: '0', LICENSE_BACKUP_ENABLED: 'false' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', () => /^admin token/m.test(out) && resolve());
      void exited.then((code) => reject(new Error(`serve exited with ${code}: ${out}`)));
    });
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  });

  it('is right, in "Recovering a lost host", about what a restore does to the named configuration file (issue 35, item 19)', async () => {
    const section = readme.slice(readme.indexOf('### Recovering a lost host'), readme.indexOf('## Moving from SQLite to PostgreSQL'));
    const text = section.replace(/\s+/g, ' ');
    assert.match(text, /keeping this host's `backup\.encryption_key`, `signing\.key_encryption_key`, `admin_token` and `database\.url` from the file it replaces/);
    assert.match(text, /kept beside it as `<file>\.replaced-<UTC time>`, such as `config\.yaml\.replaced-\d{8}T\d{9}Z`/);
    for (const item of ['`backup.targets`', '`*_file` and `*_env`', '`known_hosts_file`', '`backup.encryption_key`', '`signing.key_encryption_key`', '`LICENSE_ADMIN_TOKEN`']) assert.ok(text.includes(item), item);

    const config = path.join(work, 'config.yaml');
    writeFileSync(config, '# the backed-up host\nissuer: backed-up\n');
    const env = { LICENSE_CONFIG: config, LICENSE_DATA_DIR: path.join(work, 'data') };
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    const made = ok(await cli('backup', 'create', '--json')).json();
    const here = `# edited on this host\nissuer: this-host\nadmin_token: readme-restore-admin-token-0123456789\ndatabase:\n  url: ${path.join(work, 'data', 'license-server.db')}\n`;
    writeFileSync(config, here);
    const report = ok(await cli('backup', 'restore', made.backup_id, '--yes', '--json')).json();
    assert.equal(path.dirname(report.replaced_config), path.dirname(config));
    assert.match(path.basename(report.replaced_config), /^config\.yaml\.replaced-\d{8}T\d{9}Z$/);
    assert.equal(readFileSync(report.replaced_config, 'utf8'), here, 'the replaced file is kept whole');
    const restored = readFileSync(config, 'utf8');
    assert.match(restored, /^issuer: backed-up$/m, 'the file is the backup\'s');
    assert.match(restored, /^admin_token: readme-restore-admin-token-0123456789$/m, 'with this host\'s secrets');
    assert.ok(restored.includes(path.join(work, 'data', 'license-server.db')), 'and this host\'s database.url');
  });
});
