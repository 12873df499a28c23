import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import canonicalize from 'canonicalize';
import { runCli, ok } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

const payloadOf = (file: string) => JSON.parse(Buffer.from(readFileSync(file, 'utf8'), 'base64').toString('utf8'));

/** Checks a .lic file's signature with OpenSSL alone, given one PEM block. */
function opensslVerifies(dir: string, file: string, pem: string): boolean {
  const document = payloadOf(file);
  writeFileSync(path.join(dir, 'sig.bin'), Buffer.from(document.signature, 'base64'));
  delete document.signature;
  writeFileSync(path.join(dir, 'payload.bin'), canonicalize(document)!);
  writeFileSync(path.join(dir, 'key.pem'), pem);
  try {
    const out = execFileSync('openssl', ['pkeyutl', '-verify', '-pubin', '-inkey', 'key.pem', '-rawin', '-in', 'payload.bin', '-sigfile', 'sig.bin'], { cwd: dir, encoding: 'utf8', stdio: 'pipe' });
    return /Signature Verified Successfully/.test(out);
  } catch {
    return false;
  }
}

/** Rotation, retirement and the key set from the command line, on each engine. */
forEachEngine('signing keys from the command line', (fixture) => {
  let env: Record<string, string>;
  let cwd: string;
  const cli = (...args: string[]) => runCli(args, { env, cwd });
  let licenseId: string;

  before(async () => {
    cwd = mkdtempSync(path.join(tmpdir(), 'license-server-keys-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Initech', '--json')).json().id;
    licenseId = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--json')).json().id;
  });
  after(() => rmSync(cwd, { recursive: true, force: true }));

  it('rotates: files signed before keep verifying with the key set (license verify and OpenSSL), new ones carry the new key id', async () => {
    const [first] = ok(await cli('signing-key', 'list', '--json')).json();
    assert.equal(first.state, 'active');
    assert.equal(first.key_id, first.fingerprint.slice(0, 16));
    const oldPem = ok(await cli('signing-key', 'show')).stdout;
    const before = path.join(cwd, 'before.lic');
    ok(await cli('license', 'checkout', licenseId, '--ttl-days', '30', '--out', before));
    assert.equal(payloadOf(before).key_id, undefined, 'the store\'s first key writes files as before key ids');

    const rotated = ok(await cli('signing-key', 'rotate', '--json')).json();
    assert.equal(rotated.previous.key_id, first.key_id);
    assert.equal(rotated.previous.state, 'verify-only');
    assert.notEqual(rotated.active.key_id, first.key_id);
    const after = path.join(cwd, 'after.lic');
    ok(await cli('license', 'checkout', licenseId, '--ttl-days', '30', '--out', after));
    assert.equal(payloadOf(after).key_id, rotated.active.key_id);
    const audit = ok(await cli('audit', 'list', '--action', 'license.checked_out', '--json')).json();
    assert.equal(audit[0].details.signing_key_id, rotated.active.key_id);

    const set = ok(await cli('signing-key', 'show', '--all')).stdout;
    assert.equal(set.match(/-----BEGIN PUBLIC KEY-----/g)?.length, 2);
    assert.ok(set.startsWith(`# key_id ${rotated.active.key_id} active\n`), set);
    assert.ok(set.includes(`# key_id ${first.key_id} verify-only\n${oldPem}`));
    const setFile = path.join(cwd, 'key-set.pem');
    writeFileSync(setFile, set);
    const oldFile = path.join(cwd, 'old.pem');
    writeFileSync(oldFile, oldPem);
    for (const file of [before, after]) ok(await cli('license', 'verify', file, '--public-key', setFile));
    ok(await cli('license', 'verify', before, '--public-key', oldFile));
    const unknown = await cli('license', 'verify', after, '--public-key', oldFile);
    assert.equal(unknown.code, 9, unknown.stderr);
    assert.ok(unknown.stderr.includes(`signature verification failed: it is signed by key ${rotated.active.key_id}`), unknown.stderr);
    // Without --public-key the store's key set verifies both.
    for (const file of [before, after]) ok(await cli('license', 'verify', file));

    const newPem = ok(await cli('signing-key', 'show')).stdout;
    assert.ok(opensslVerifies(cwd, before, oldPem));
    assert.ok(opensslVerifies(cwd, after, newPem));
    assert.ok(!opensslVerifies(cwd, after, oldPem));
  });

  it('refuses to retire the active key, and a key whose files may still be valid unless --force; a retired key verifies nothing', async () => {
    const keys = ok(await cli('signing-key', 'list', '--json')).json();
    const active = keys.find((k: any) => k.state === 'active');
    const old = keys.find((k: any) => k.state === 'verify-only');
    const activeRefused = await cli('signing-key', 'retire', active.key_id);
    assert.equal(activeRefused.code, 6, activeRefused.stderr);
    assert.match(activeRefused.stderr, /SIGNING_KEY_ACTIVE/);
    const inUse = await cli('signing-key', 'retire', old.key_id);
    assert.equal(inUse.code, 6, inUse.stderr);
    assert.match(inUse.stderr, /may be valid until \d{4}-\d\d-\d\dT/);
    assert.match(inUse.stderr, /SIGNING_KEY_IN_USE/);
    const missing = await cli('signing-key', 'retire', '0123456789abcdef');
    assert.equal(missing.code, 4);
    assert.match(missing.stderr, /SIGNING_KEY_NOT_FOUND/);

    const retired = ok(await cli('signing-key', 'retire', old.key_id, '--force', '--json')).json();
    assert.equal(retired.state, 'retired');
    assert.equal(retired.forced, true);
    const again = await cli('signing-key', 'retire', old.key_id, '--force');
    assert.equal(again.code, 5);
    assert.match(again.stderr, /SIGNING_KEY_RETIRED/);
    const audit = ok(await cli('audit', 'list', '--action', 'signing_key.retired', '--json')).json();
    assert.equal(audit[0].details.key_id, old.key_id);
    assert.equal(audit[0].details.forced, true);
    assert.equal(ok(await cli('signing-key', 'show', '--all')).stdout.match(/BEGIN PUBLIC KEY/g)?.length, 1);
    const before = await cli('license', 'verify', path.join(cwd, 'before.lic'));
    assert.equal(before.code, 9, 'a file of a retired key no longer verifies with the store\'s key set');
  });

  it('refuses key sets with a private key, a malformed block or the same key twice', async () => {
    const pem = ok(await cli('signing-key', 'show')).stdout;
    const cases: Array<[string, RegExp]> = [
      [`${pem}-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n`, /block 2 is a private key/],
      [`${pem}-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAAAAA\n-----END PUBLIC KEY-----\n`, /block 2 is not a well-formed Ed25519 public key/],
      [`${pem}${pem}`, /appears twice/],
      [`${pem}${pem.slice(0, 60)}`, /block 2 is not closed \(is the file cut short\?\)/],
      [pem.replace('END PUBLIC KEY', 'END PRIVATE KEY'), /block 1 begins "PUBLIC KEY" but ends "PRIVATE KEY"/],
    ];
    for (const [text, reason] of cases) {
      const file = path.join(cwd, 'bad-set.pem');
      writeFileSync(file, text);
      const result = await cli('license', 'verify', path.join(cwd, 'after.lic'), '--public-key', file);
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /PUBLIC_KEY_INVALID/);
      assert.match(result.stderr, reason);
      assert.ok(!result.stderr.includes('MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v'), 'the private key is not echoed');
    }
  });

  it('exports a key for escrow (encrypted PKCS#8 that OpenSSL opens) and imports it into another store, audited both ways', async () => {
    const pem = ok(await cli('signing-key', 'show')).stdout;
    const active = ok(await cli('signing-key', 'list', '--json')).json().find((k: any) => k.state === 'active');
    const passphraseFile = path.join(cwd, 'escrow-passphrase');
    writeFileSync(passphraseFile, 'a long escrow passphrase\n');
    const escrow = path.join(cwd, 'escrow.p8');
    const noTerminal = await cli('signing-key', 'export', active.key_id, '--out', escrow);
    assert.equal(noTerminal.code, 2);
    assert.match(noTerminal.stderr, /PASSPHRASE_REQUIRED/);
    writeFileSync(path.join(cwd, 'short'), 'short\n');
    assert.match((await cli('signing-key', 'export', active.key_id, '--out', escrow, '--passphrase-file', path.join(cwd, 'short'))).stderr, /fewer than 12 characters/);
    ok(await cli('signing-key', 'export', active.key_id, '--out', escrow, '--passphrase-file', passphraseFile));
    const text = readFileSync(escrow, 'utf8');
    assert.match(text, /^-----BEGIN ENCRYPTED PRIVATE KEY-----\n/);
    assert.equal(statSync(escrow).mode & 0o777, 0o600);
    const opened = execFileSync('openssl', ['pkey', '-in', escrow, '-passin', `file:${passphraseFile}`, '-pubout'], { encoding: 'utf8' });
    assert.equal(opened, pem);
    assert.equal((await cli('signing-key', 'export', active.key_id, '--out', escrow, '--passphrase-file', passphraseFile)).code, 5, 'never over an existing file');

    // Another store (a host rebuilt after its database was lost) takes the key back and signs with it.
    const other = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
    const otherCli = (...args: string[]) => runCli(args, { env: other, cwd });
    ok(await otherCli('init'));
    writeFileSync(path.join(cwd, 'wrong'), 'not the passphrase at all\n');
    const wrong = await otherCli('signing-key', 'import', escrow, '--passphrase-file', path.join(cwd, 'wrong'));
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /KEY_FILE_INVALID/);
    const imported = ok(await otherCli('signing-key', 'import', escrow, '--passphrase-file', passphraseFile, '--activate', '--json')).json();
    assert.deepEqual([imported.key_id, imported.state], [active.key_id, 'active']);
    assert.equal(ok(await otherCli('signing-key', 'show')).stdout, pem);
    const again = await otherCli('signing-key', 'import', escrow, '--passphrase-file', passphraseFile);
    assert.equal(again.code, 5);
    assert.match(again.stderr, /SIGNING_KEY_EXISTS/);
    const customer = ok(await otherCli('customer', 'create', '--name', 'Rebuilt', '--json')).json().id;
    const license = ok(await otherCli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--json')).json().id;
    const file = path.join(cwd, 'rebuilt.lic');
    ok(await otherCli('license', 'checkout', license, '--ttl-days', '3', '--out', file));
    const pemFile = path.join(cwd, 'escrowed.pem');
    writeFileSync(pemFile, pem);
    ok(await otherCli('license', 'verify', file, '--public-key', pemFile));
    assert.equal(ok(await cli('audit', 'list', '--action', 'signing_key.exported', '--json')).json()[0].details.key_id, active.key_id);
    assert.equal(ok(await otherCli('audit', 'list', '--action', 'signing_key.imported', '--json')).json()[0].details.key_id, active.key_id);
    assert.ok(!readFileSync(escrow, 'utf8').includes(pem.split('\n')[1]!), 'the escrow file is not the public key');
  });

  it('prepares the next key ahead of the switch: it is in the key set at once, signs nothing until rotate switches to it', async () => {
    const active = ok(await cli('signing-key', 'show', '--json')).json();
    const next = ok(await cli('signing-key', 'rotate', '--prepare', '--json')).json();
    assert.deepEqual([next.state, next.created], ['next', true]);
    assert.equal(ok(await cli('signing-key', 'rotate', '--prepare', '--json')).json().key_id, next.key_id, 'one next key at a time');
    const shipped = ok(await cli('signing-key', 'show', '--all')).stdout;
    assert.ok(shipped.startsWith(`# key_id ${active.key_id} active\n`), shipped);
    assert.ok(shipped.includes(`# key_id ${next.key_id} next\n`));
    const shippedFile = path.join(cwd, 'shipped-set.pem');
    writeFileSync(shippedFile, shipped);
    const stillOld = path.join(cwd, 'still-old.lic');
    ok(await cli('license', 'checkout', licenseId, '--ttl-days', '5', '--out', stillOld));
    assert.equal(payloadOf(stillOld).key_id, active.key_id, 'the next key signs nothing before the switch');

    const rotated = ok(await cli('signing-key', 'rotate', '--json')).json();
    assert.equal(rotated.active.key_id, next.key_id, 'rotate switches to the prepared key');
    const switched = path.join(cwd, 'switched.lic');
    ok(await cli('license', 'checkout', licenseId, '--ttl-days', '5', '--out', switched));
    assert.equal(payloadOf(switched).key_id, next.key_id);
    // A client released with the set before the switch verifies both files.
    for (const file of [stillOld, switched]) ok(await cli('license', 'verify', file, '--public-key', shippedFile));
  });
});
