import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generateKeyPair } from '../../src/lib/crypto/hpke.js';
import { checkoutLicense } from '../../src/lib/offline/checkout.js';
import { encodeMachineKey } from '../../src/lib/offline/machine-key.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { activationRequestFor, uncheckedRequestText } from '../support/activation-request.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

/**
 * `license create/update --binding`, `license show`, the checkout's refusal of a bare
 * --hardware-id, and `license verify --machine-private-key` (docs/offline-license-format.md
 * section 14). The file is checked out through the library with a machine key, as the
 * activation request's checkout passes it (test/clients/machine-key-e2e.test.ts runs
 * `license checkout --request` itself).
 */
forEachEngine('machine-key binding from the command line', (fixture) => {
  let work: string;
  let server: Record<string, string>;
  let customer: string;
  const cli = (...args: string[]) => runCli(args, { env: server, cwd: work });
  const airGapped = (...args: string[]) => runCli(args, { cwd: path.join(work, 'air-gapped') });

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-machine-key-cli-'));
    mkdirSync(path.join(work, 'air-gapped'));
    server = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_ISSUER: 'licenses.example.com' };
    ok(await cli('init'));
    writeFileSync(path.join(work, 'air-gapped', 'server.pem'), ok(await cli('signing-key', 'show')).stdout);
    customer = ok(await cli('customer', 'create', '--name', 'Air-gapped GmbH', '--json')).json().id;
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('creates, shows and updates the binding; a bare --hardware-id checkout is MACHINE_KEY_REQUIRED', async () => {
    const created = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--with-decryption-key', '--binding', 'machine-key', '--json')).json();
    assert.equal(created.binding, 'machine-key');
    assert.match(ok(await cli('license', 'show', created.id)).stdout, /^binding: +machine-key/m);
    const refused = await cli('license', 'checkout', created.id, '--ttl-days', '30', '--hardware-id', 'hw2-a', '--json');
    assert.equal(refused.code, 6, refused.stderr);
    assert.equal(refused.json().error.code, 'MACHINE_KEY_REQUIRED');

    const plain = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--json')).json();
    assert.equal(plain.binding, 'hardware-id', 'the default');
    const updated = ok(await cli('license', 'update', plain.id, '--binding', 'machine-key', '--json')).json();
    assert.deepEqual(updated.changes.binding, { before: 'hardware-id', after: 'machine-key' });
    const bad = await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--binding', 'machine');
    assert.equal(bad.code, 2, bad.stderr);
  });

  it('license verify opens the key with --machine-private-key only; without it MACHINE_KEY_MISSING', async () => {
    const license = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--with-decryption-key', '--binding', 'machine-key', '--json')).json();
    const machine = generateKeyPair();
    const db = await openDatabase(server.LICENSE_DATABASE_URL!);
    try {
      const result = await checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'hw2-a', machineKey: encodeMachineKey(machine.publicKey) }, { actor: 'cli:test', issuer: 'licenses.example.com' });
      writeFileSync(path.join(work, 'air-gapped', 'machine.lic'), result.license_file);
    } finally {
      await db.close();
    }
    // The key file as the machine keeps it: base64url, or hex.
    writeFileSync(path.join(work, 'air-gapped', 'machine.key'), `${Buffer.from(machine.privateKey).toString('base64url')}\n`);
    writeFileSync(path.join(work, 'air-gapped', 'machine.hex'), Buffer.from(machine.privateKey).toString('hex'));
    writeFileSync(path.join(work, 'air-gapped', 'other.key'), Buffer.from(generateKeyPair().privateKey).toString('base64url'));
    const verify = (...extra: string[]) => airGapped('license', 'verify', 'machine.lic', '--public-key', 'server.pem', '--hardware-id', 'hw2-a', ...extra, '--json');

    for (const keyFile of ['machine.key', 'machine.hex']) {
      const report = ok(await verify('--machine-private-key', keyFile)).json();
      assert.deepEqual([report.valid, report.decryption_key_unsealed, report.license.version], [true, true, 2], keyFile);
    }
    const missing = await verify();
    assert.equal(missing.code, 11, missing.stderr);
    assert.equal(missing.json().error.code, 'MACHINE_KEY_MISSING');
    const other = await verify('--machine-private-key', 'other.key');
    assert.equal(other.json().error.code, 'DECRYPTION_FAILED');
    // The key is a secret: a file that is not one is refused without echoing it.
    writeFileSync(path.join(work, 'air-gapped', 'bad.key'), 'not-a-key-but-a-secret-looking-text');
    const bad = await verify('--machine-private-key', 'bad.key');
    assert.equal(bad.json().error.code, 'INVALID_INPUT');
    assert.doesNotMatch(bad.stdout + bad.stderr, /secret-looking/);
    const inspected = ok(await airGapped('license', 'inspect', 'machine.lic', '--public-key', 'server.pem'));
    assert.match(inspected.stdout, /^machine key: +[A-Za-z0-9_-]{43}$/m);
  });

  it('license checkout --request with a machine_key of small order exits 8 ACTIVATION_REQUEST_MALFORMED (it was exit 1, "This is a bug")', async () => {
    const license = ok(await cli('license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--with-decryption-key', '--binding', 'machine-key', '--json')).json();
    const p = (1n << 255n) - 19n;
    const text = uncheckedRequestText({ ...activationRequestFor(license.key, 'hw2-small-order').request, machine_key: Buffer.from(p.toString(16).padStart(64, '0'), 'hex').reverse().toString('base64url') });
    writeFileSync(path.join(work, 'small-order.txt'), text);
    const refused = await cli('license', 'checkout', license.id, '--ttl-days', '30', '--request', path.join(work, 'small-order.txt'), '--out', '-');
    assert.equal(refused.code, 8, `${refused.stdout}\n${refused.stderr}`);
    assert.match(refused.stderr, /activation request is malformed: "machine_key" is an X25519 point of small order/);
    assert.doesNotMatch(refused.stderr, /bug/i);
  });
});
