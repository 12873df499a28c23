import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import canonicalize from 'canonicalize';
import { checkoutLicense } from '../../src/lib/offline/checkout.js';
import { decodeLicenseFile } from '../../src/lib/offline/format.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { runCli, type CliResult, ok } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';


function failed(result: CliResult, exit: number, code: string, message?: RegExp): void {
  assert.equal(result.code, exit, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.match(result.stderr, new RegExp(`\\(${code}\\)\\nTry: `));
  if (message) assert.match(result.stderr, message);
  assert.ok(!/\n\s+at /.test(result.stderr), 'no stack trace');
}

forEachEngine('offline license files from the command line', (fixture) => {
  let work: string;
  let server: Record<string, string>;
  let pem: string;
  let plainId: string;
  let keyedKey: string;
  const cli = (...args: string[]) => runCli(args, { env: server, cwd: work });
  /** A machine that has never seen the server's data: only a file and the PEM. */
  const airGapped = (...args: string[]) => runCli(args, { cwd: path.join(work, 'air-gapped') });
  const checkouts = async () => ok(await cli('audit', 'list', '--action', 'license.checked_out', '--limit', '1000', '--json')).json().length;

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-offline-cli-'));
    mkdirSync(path.join(work, 'usb'));
    mkdirSync(path.join(work, 'air-gapped'));
    server = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_ISSUER: 'licenses.example.com' };
    ok(await cli('init'));
    pem = ok(await cli('signing-key', 'show')).stdout;
    writeFileSync(path.join(work, 'air-gapped', 'server.pem'), pem);
    const customer = ok(await cli('customer', 'create', '--name', 'Initech <"&">', '--json')).json().id;
    ok(await cli('entitlement', 'create', '--code', 'seats', '--name', 'Seats'));
    plainId = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-from', '2025-01-01', '--valid-until', '2099-01-01', '--entitlement', 'seats:5', '--json')).json().id;
    keyedKey = ok(await cli('license', 'create', '--customer', customer, '--type', 'hybrid', '--valid-until', '2099-01-01', '--with-decryption-key', '--json')).json().key;
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('checks out to a directory; the file verifies with only the PEM, and not on another machine', async () => {
    const result = ok(await cli('license', 'checkout', keyedKey, '--ttl-days', '90', '--hardware-id', 'machine-A', '--out', 'usb'));
    assert.match(result.stdout, /read back and verified/);
    const files = readdirSync(path.join(work, 'usb'));
    assert.equal(files.length, 1, 'no .partial file is left behind');
    assert.match(files[0]!, /^license-[0-9A-Z]{4}-[0-9A-Z]{3}-\d{8}T\d{6}Z\.lic$/);
    const copied = path.join(work, 'air-gapped', 'license.lic');
    writeFileSync(copied, readFileSync(path.join(work, 'usb', files[0]!)));

    const verified = ok(await airGapped('license', 'verify', 'license.lic', '--public-key', 'server.pem', '--hardware-id', 'machine-A', '--json')).json();
    assert.equal(verified.valid, true);
    assert.equal(verified.decryption_key_unsealed, true);
    assert.equal(verified.license.issuer, 'licenses.example.com');
    const human = ok(await airGapped('license', 'verify', 'license.lic', '--public-key', 'server.pem', '--hardware-id', 'machine-A'));
    assert.match(human.stdout, /^valid: signature verified/);

    const wrong = await airGapped('license', 'verify', 'license.lic', '--public-key', 'server.pem', '--hardware-id', 'machine-B');
    failed(wrong, 11, 'HARDWARE_MISMATCH', /^Error: hardware ID mismatch: failed to decrypt license key/);
    assert.ok(!existsSync(path.join(work, 'air-gapped', 'data')), 'verifying with a PEM touches no database');
  });

  it('refuses to call a file with a sealed key valid without --hardware-id, unless --skip-hardware-check says so', async () => {
    const file = ok(await cli('license', 'checkout', keyedKey, '--ttl-days', '30', '--hardware-id', 'machine-A', '--out', '-')).stdout;
    writeFileSync(path.join(work, 'air-gapped', 'sealed.lic'), file);
    const verify = (...extra: string[]) => airGapped('license', 'verify', 'sealed.lic', '--public-key', 'server.pem', ...extra);

    const refused = await verify();
    assert.equal(refused.code, 6);
    assert.equal(refused.stdout, '');
    assert.equal(refused.stderr, [
      'Error: hardware ID required: the file is bound to "machine-A" and carries a decryption key sealed to it, so its binding must be checked (HARDWARE_ID_REQUIRED)',
      'Try: Pass --hardware-id with this machine\'s hardware ID, or --skip-hardware-check to check only the signature and the validity window.',
      '',
    ].join('\n'));
    const refusedJson = await verify('--json');
    assert.equal(refusedJson.code, 6);
    assert.equal(refusedJson.json().error.code, 'HARDWARE_ID_REQUIRED');

    const skipped = ok(await verify('--skip-hardware-check'));
    assert.match(skipped.stdout, /^valid: signature verified, valid until \S+; hardware binding NOT checked$/m);
    assert.match(skipped.stdout, /^hardware: +bound to "machine-A", NOT checked \(--skip-hardware-check\)$/m);
    const skippedJson = ok(await verify('--skip-hardware-check', '--json')).json();
    assert.deepEqual(
      [skippedJson.valid, skippedJson.hardware_checked, skippedJson.hardware_check_skipped, skippedJson.decryption_key_unsealed],
      [true, false, true, false],
    );
    const checked = ok(await verify('--hardware-id', 'machine-A', '--json')).json();
    assert.deepEqual([checked.hardware_checked, checked.hardware_check_skipped, checked.decryption_key_unsealed], [true, false, true]);

    // The flag skips the binding only: a changed file still fails its signature.
    const object = JSON.parse(Buffer.from(file, 'base64').toString('utf8'));
    writeFileSync(path.join(work, 'air-gapped', 'sealed-tampered.lic'), Buffer.from(canonicalize({ ...object, customer_name: 'Someone Else' })!).toString('base64'));
    failed(await airGapped('license', 'verify', 'sealed-tampered.lic', '--public-key', 'server.pem', '--skip-hardware-check'), 9, 'SIGNATURE_INVALID');
    const both = await verify('--skip-hardware-check', '--hardware-id', 'machine-A');
    assert.equal(both.code, 2);
    assert.match(both.stderr, /^Error: --hardware-id=machine-A cannot also be provided when using --skip-hardware-check \(USAGE\)$/m);
  });

  it('returns the same shape as the HTTP response with --json, and the file holds exactly license_file', async () => {
    const out = path.join(work, 'usb', 'plain.lic');
    const json = ok(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', out, '--json')).json();
    assert.deepEqual(Object.keys(json).sort(), ['filename', 'license_file', 'valid_until']);
    assert.equal(readFileSync(out, 'utf8'), json.license_file);
    // The answer's time in the one form; the file itself keeps whole seconds.
    assert.match(json.valid_until, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.000Z$/);
    assert.equal(json.valid_until, new Date(decodeLicenseFile(json.license_file).payload.valid_until).toISOString());
    assert.match(decodeLicenseFile(json.license_file).payload.valid_until, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    const stdout = ok(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', '-')).stdout;
    assert.match(stdout, /^[A-Za-z0-9+/]+=*\n$/);
  });

  it('produces signatures that OpenSSL verifies with the PEM from signing-key show', async () => {
    const file = ok(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', '-')).stdout;
    const object = JSON.parse(Buffer.from(file, 'base64').toString('utf8'));
    const signature = Buffer.from(object.signature, 'base64');
    delete object.signature;
    writeFileSync(path.join(work, 'payload.json'), canonicalize(object)!);
    writeFileSync(path.join(work, 'payload.sig'), signature);
    writeFileSync(path.join(work, 'server.pem'), pem);
    const out = execFileSync('openssl', ['pkeyutl', '-verify', '-pubin', '-inkey', 'server.pem', '-rawin', '-in', 'payload.json', '-sigfile', 'payload.sig'], { cwd: work, encoding: 'utf8' });
    assert.match(out, /Signature Verified Successfully/);
  });

  it('refuses to overwrite without --force, before checking anything out', async () => {
    const out = path.join(work, 'usb', 'existing.lic');
    writeFileSync(out, 'precious');
    const before = await checkouts();
    failed(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', out), 5, 'FILE_EXISTS');
    assert.equal(readFileSync(out, 'utf8'), 'precious');
    assert.equal(await checkouts(), before);
    ok(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', out, '--force'));
    assert.notEqual(readFileSync(out, 'utf8'), 'precious');
    assert.equal(await checkouts(), before + 1);
  });

  it('refuses bad input with its own code and exit, writing no file and no audit entry', async () => {
    const before = await checkouts();
    const dir = path.join(work, 'refused');
    mkdirSync(dir);
    const cases: Array<[string[], number, string]> = [
      [['--ttl-days', '0'], 2, 'INVALID_TTL_DAYS'],
      [['--ttl-days', '366'], 2, 'INVALID_TTL_DAYS'],
      [['--ttl-days', '-1'], 2, 'INVALID_TTL_DAYS'],
      [['--ttl-days', '1.5'], 2, 'INVALID_TTL_DAYS'],
      [['--ttl-days', 'thirty'], 2, 'INVALID_TTL_DAYS'],
      [[], 2, 'USAGE'],
      [['--ttl-days', '30', '--hardware-id', ''], 2, 'INVALID_HARDWARE_ID'],
      [['--ttl-days', '30', '--hardware-id', 'x'.repeat(257)], 2, 'INVALID_HARDWARE_ID'],
      [['--ttl-days', '30', '--hardware-id', 'bell\u0007'], 2, 'INVALID_HARDWARE_ID'],
    ];
    for (const [flags, exit, code] of cases) {
      failed(await cli('license', 'checkout', plainId, '--out', dir, ...flags), exit, code);
    }
    const nowhere = path.join(work, 'no', 'such', 'dir', 'x.lic');
    failed(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', nowhere), 12, 'FILE_WRITE_FAILED');
    failed(await cli('license', 'checkout', keyedKey, '--ttl-days', '30', '--out', dir), 6, 'HARDWARE_ID_REQUIRED');
    ok(await cli('license', 'deactivate', plainId));
    failed(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', dir), 6, 'LICENSE_INACTIVE');
    ok(await cli('license', 'activate', plainId));
    const json = await cli('license', 'checkout', plainId, '--ttl-days', '0', '--json');
    assert.equal(json.json().error.code, 'INVALID_TTL_DAYS');
    assert.deepEqual(readdirSync(dir), []);
    assert.equal(await checkouts(), before);
  });

  it('verify names each failure: tampered, truncated, expired, other key, not a license file', async () => {
    const good = ok(await cli('license', 'checkout', plainId, '--ttl-days', '30', '--out', '-')).stdout;
    const write = (name: string, content: string | Buffer) => {
      writeFileSync(path.join(work, 'air-gapped', name), content);
      return name;
    };
    const object = JSON.parse(Buffer.from(good, 'base64').toString('utf8'));
    const tampered = write('tampered.lic', Buffer.from(canonicalize({ ...object, customer_name: 'Someone Else' })!).toString('base64'));
    const verify = (file: string) => airGapped('license', 'verify', file, '--public-key', 'server.pem');
    failed(await verify(tampered), 9, 'SIGNATURE_INVALID', /^Error: signature verification failed/);
    failed(await verify(write('truncated.lic', good.slice(0, 100))), 8, 'LICENSE_FILE_MALFORMED');
    failed(await verify(write('notes.lic', 'Dear customer, ...')), 8, 'LICENSE_FILE_MALFORMED');
    failed(await verify('missing.lic'), 2, 'FILE_UNREADABLE');

    const db = await openDatabase(server.LICENSE_DATABASE_URL!);
    try {
      const old = await checkoutLicense(db, plainId, { ttlDays: 1 }, { actor: 'test', issuer: 'x', clock: () => new Date(Date.now() - 3 * 86_400_000) });
      failed(await verify(write('expired.lic', old.license_file)), 10, 'LICENSE_EXPIRED', /^Error: license expired/);
    } finally {
      await db.close();
    }
    write('other.pem', '-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEY-----\n');
    failed(await airGapped('license', 'verify', write('good.lic', good), '--public-key', 'other.pem'), 9, 'SIGNATURE_INVALID');
    write('bad.pem', 'not a key');
    failed(await airGapped('license', 'verify', 'good.lic', '--public-key', 'bad.pem'), 2, 'PUBLIC_KEY_INVALID');
    failed(await airGapped('license', 'verify', 'good.lic'), 7, 'DATABASE_NOT_FOUND', /^Try: Pass --public-key/m);
    assert.ok(!existsSync(path.join(work, 'air-gapped', 'data')), 'no store is created to look for a key in');
    const keyless = path.join(work, 'air-gapped', 'keyless.db');
    await (await openDatabase(keyless)).close();
    failed(await airGapped('license', 'verify', 'good.lic', '--database-url', keyless), 4, 'SIGNING_KEY_MISSING');
    ok(await cli('license', 'verify', path.join(work, 'air-gapped', 'good.lic')));
  });

  it('inspect shows the payload and the signature status without the private key', async () => {
    const file = ok(await cli('license', 'checkout', keyedKey, '--ttl-days', '30', '--hardware-id', 'machine-A', '--out', '-')).stdout;
    writeFileSync(path.join(work, 'air-gapped', 'inspect.lic'), file);
    const withKey = ok(await airGapped('license', 'inspect', 'inspect.lic', '--public-key', 'server.pem', '--json')).json();
    assert.equal(withKey.signature, 'valid');
    assert.equal(withKey.window, 'valid');
    assert.equal(withKey.hardware_id, 'machine-A');
    assert.equal(withKey.customer_name, 'Initech <"&">');
    failed(await airGapped('license', 'inspect', 'inspect.lic'), 7, 'DATABASE_NOT_FOUND', /^Try: Pass --public-key/m);
    const keyless = path.join(work, 'air-gapped', 'keyless-inspect.db');
    await (await openDatabase(keyless)).close();
    const unchecked = ok(await airGapped('license', 'inspect', 'inspect.lic', '--database-url', keyless));
    assert.match(unchecked.stdout, /^signature:\s+unchecked/m);
    assert.match(unchecked.stdout, /^customer:\s+Initech <"&">$/m);
    const stored = ok(await cli('license', 'inspect', path.join(work, 'air-gapped', 'inspect.lic'), '--json')).json();
    assert.equal(stored.signature, 'valid');
    writeFileSync(path.join(work, 'air-gapped', 'other.pem'), '-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEY-----\n');
    assert.equal(ok(await airGapped('license', 'inspect', 'inspect.lic', '--public-key', 'other.pem', '--json')).json().signature, 'invalid');
  });
});
