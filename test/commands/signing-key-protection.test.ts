import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { runCli, ok, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { startServe } from '../support/serve.js';

const KEK = 'cd'.repeat(32);
const OTHER_KEK = 'ef'.repeat(32);

function refused(result: CliResult, exit: number, code: string): void {
  assert.equal(result.code, exit, result.stderr);
  assert.match(result.stderr, new RegExp(`\\(${code}\\)`));
}

/** Every file under dir, as bytes (a backup archive is unpacked first). */
function bytesUnder(dir: string): Buffer[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => path.join(dir, name))
    .filter((file) => statSync(file).isFile())
    .map((file) => readFileSync(file));
}

/** Private keys sealed at rest under signing.key_encryption_key, on each engine. */
forEachEngine('signing keys sealed at rest', (fixture) => {
  let work: string;
  let url: string;
  const base = () => ({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'backups') });
  const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { env: { ...base(), ...extra }, cwd: work });
  const sealed = { LICENSE_SIGNING_KEY_ENCRYPTION_KEY: KEK };
  let seeds: Buffer[];
  let licenseId: string;

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-server-sealed-'));
    url = await fixture.freshUrl();
    ok(await cli(['init']));
    ok(await cli(['signing-key', 'rotate']));
    const customer = ok(await cli(['customer', 'create', '--name', 'Hooli', '--json'])).json().id;
    licenseId = ok(await cli(['license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--json'])).json().id;
    const db = await openDatabase(url);
    try {
      seeds = (await db.query('SELECT private_key FROM signing_keys')).map((row) => Buffer.from(row.private_key as Uint8Array));
    } finally {
      await db.close();
    }
    assert.equal(seeds.length, 2);
    assert.ok(seeds.every((seed) => seed.length === 32));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const holdsASeed = (chunks: Buffer[]) => chunks.some((chunk) => seeds.some((seed) => chunk.includes(seed)));

  it('protect seals every key in one go; afterwards no private key byte is in the database, a dump or an unencrypted backup', async () => {
    const unprotected = await cli(['signing-key', 'protect']);
    refused(unprotected, 3, 'SIGNING_KEK_REQUIRED');
    const report = ok(await cli(['signing-key', 'protect', '--json'], sealed)).json();
    assert.equal(report.changed.length, 2);
    assert.deepEqual(ok(await cli(['signing-key', 'list', '--json'], sealed)).json().map((k: any) => k.sealed), [true, true]);
    assert.deepEqual(ok(await cli(['signing-key', 'protect', '--json'], sealed)).json(), { changed: [], unchanged: report.changed, daemons_without_key: [], erase_warning: null });

    const backup = ok(await cli(['backup', 'create'], { ...sealed, LICENSE_BACKUP_ENCRYPTION_KEY: '' }));
    assert.match(backup.stderr, /the private signing keys in it are sealed/);
    const [newest] = ok(await cli(['backup', 'list', '--json'])).json();
    const archive = path.join(work, 'unpacked');
    mkdirSync(archive);
    execFileSync('tar', ['-xzf', path.join(work, 'backups', newest.file), '-C', archive]);
    assert.ok(!holdsASeed(bytesUnder(archive)), 'no unsealed seed in the backup');
    if (fixture.engine === 'sqlite') {
      const files = [url, `${url}-wal`].filter(existsSync).map((file) => readFileSync(file));
      assert.ok(!holdsASeed(files), 'no unsealed seed in the SQLite file or its WAL');
    } else {
      const dump = execFileSync('pg_dump', ['--data-only', '--table=signing_keys', url]);
      assert.ok(!holdsASeed([dump, Buffer.from(dump.toString('utf8').replace(/\\\\x([0-9a-f]+)/g, (_, hex) => Buffer.from(hex, 'hex').toString('latin1')), 'latin1')]));
    }
  });

  it('without the key-encryption key: signing and serve are refused, a wrong key is named as such, verifying still works', async () => {
    const out = path.join(work, 'sealed.lic');
    ok(await cli(['license', 'checkout', licenseId, '--ttl-days', '10', '--out', out], sealed));
    refused(await cli(['license', 'checkout', licenseId, '--ttl-days', '10', '--out', path.join(work, 'no.lic')]), 3, 'SIGNING_KEK_REQUIRED');
    const wrong = await cli(['license', 'checkout', licenseId, '--ttl-days', '10', '--out', path.join(work, 'no.lic')], { LICENSE_SIGNING_KEY_ENCRYPTION_KEY: OTHER_KEK });
    refused(wrong, 3, 'SIGNING_KEK_WRONG');
    assert.match(wrong.stderr, /kek id [0-9a-f]{16}\) is not the one that sealed signing key [0-9a-f]{16} \(kek id [0-9a-f]{16}\)/);
    assert.ok(!wrong.stderr.includes(OTHER_KEK) && !wrong.stderr.includes(KEK));
    ok(await cli(['license', 'verify', out]));

    await assert.rejects(startServe(base()), /SIGNING_KEK_REQUIRED/);
    const serve = await startServe({ ...base(), ...sealed });
    assert.equal((await serve.stop()).code, 0);
  });

  it('a restore onto a fresh host with the same key-encryption key signs with the same key', async () => {
    const pem = ok(await cli(['signing-key', 'show'], sealed)).stdout;
    const backup = ok(await cli(['backup', 'create', '--json'], sealed)).json();
    const target = await fixture.freshUrl();
    const host = path.join(work, 'host');
    mkdirSync(host);
    const hostEnv = { LICENSE_DATABASE_URL: target, LICENSE_BACKUP_PATH: path.join(host, 'backups'), ...sealed };
    ok(await runCli(['backup', 'restore', path.join(work, 'backups', backup.file), '--yes'], { env: hostEnv, cwd: host }));
    assert.equal(ok(await runCli(['signing-key', 'show'], { env: hostEnv, cwd: host })).stdout, pem);
    const file = path.join(host, 'restored.lic');
    ok(await runCli(['license', 'checkout', licenseId, '--ttl-days', '5', '--out', file], { env: hostEnv, cwd: host }));
    const pemFile = path.join(host, 'key.pem');
    writeFileSync(pemFile, pem);
    ok(await runCli(['license', 'verify', file, '--public-key', pemFile], { env: hostEnv, cwd: host }));
    refused(await runCli(['license', 'checkout', licenseId, '--ttl-days', '5', '--out', path.join(host, 'x.lic')], { env: { ...hostEnv, LICENSE_SIGNING_KEY_ENCRYPTION_KEY: '' }, cwd: host }), 3, 'SIGNING_KEK_REQUIRED');

    // A host without the key-encryption key gets the data, and is told plainly that it cannot sign.
    const bare = path.join(work, 'bare-host');
    mkdirSync(bare);
    const bareEnv = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(bare, 'backups') };
    const restored = ok(await runCli(['backup', 'restore', path.join(work, 'backups', backup.file), '--yes'], { env: bareEnv, cwd: bare }));
    assert.match(restored.stderr, /^warning: signing key [0-9a-f]{16} is sealed and no signing\.key_encryption_key is configured.*set signing\.key_encryption_key to the key-encryption key/m);
    assert.equal(ok(await runCli(['signing-key', 'show'], { env: bareEnv, cwd: bare })).stdout, pem);
  });

  it('unprotect stores the keys unsealed again, and then backups without encryption warn that they hold them', async () => {
    const report = ok(await cli(['signing-key', 'unprotect', '--json'], sealed)).json();
    assert.equal(report.changed.length, 2);
    const backup = ok(await cli(['backup', 'create'], { LICENSE_BACKUP_ENCRYPTION_KEY: '' }));
    assert.match(backup.stderr, /holds 2 unsealed private signing keys/);
    ok(await cli(['license', 'checkout', licenseId, '--ttl-days', '10', '--out', path.join(work, 'plain.lic')]));
  });
});
