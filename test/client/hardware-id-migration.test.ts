import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { deriveHardwareId, deriveHardwareIdV1 } from '../../src/client/hardware-id.js';
import { forEachEngine } from '../support/engines.js';
import { LicenseFixture, type FixtureLicense } from '../support/license-fixture.js';

const run = promisify(execFile);
const exampleDir = fileURLToPath(new URL('../../examples/go/', import.meta.url));
const goEnv = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

interface AuditEntry {
  readonly action: string;
  readonly entity_id: string;
  readonly details: Record<string, unknown>;
}

interface MachineView {
  readonly id: string;
  readonly hardware_id: string;
  readonly holds_seat: boolean;
  readonly active: boolean;
}

/**
 * A machine that validated with hw1 (an older client) moves to hw2 without a second seat
 * (issue 28): the new client sends its previous ID, the server moves the machine record and
 * audits it, and the .lic file bound to the hw1 ID still verifies and unseals. Against a
 * real serve, on SQLite and PostgreSQL, with the Node client and the Go client.
 */
forEachEngine('moving a machine from hw1 to hw2 (previous_hardware_id)', (engine) => {
  let fixture: LicenseFixture;
  const hw1 = deriveHardwareIdV1();
  const hw2 = deriveHardwareId();

  before(async function () {
    this.timeout(60_000);
    // The derived IDs of this machine are the subject: hw2 must be derivable here.
    if (!hw2.startsWith('hw2-')) {
      if (process.env.CI === 'true') throw new Error(`no hw2 ID on this machine (${hw2})`);
      this.skip();
    }
    fixture = await LicenseFixture.start({}, await engine.freshUrl());
  });
  afterEach(() => fixture?.closeClients());
  after(() => fixture?.cleanup());

  /** A node-locked license for one machine with a decryption key, and a .lic bound to `boundTo` (which takes the seat). */
  const singleSeatLicense = async (boundTo?: string): Promise<FixtureLicense> => {
    const license = (await fixture.api('POST', '/api/licenses', {
      customer_id: fixture.customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: 1, with_decryption_key: true,
    })).body;
    if (boundTo === undefined) return { id: license.id, key: license.key, licenseFile: path.join(fixture.work, 'none.lic') };
    const checkout = await fixture.api('POST', `/api/licenses/${license.id}/checkout`, { ttl_days: 30, hardware_id: boundTo });
    assert.equal(checkout.status, 200, JSON.stringify(checkout.body));
    const licenseFile = path.join(fixture.work, `${license.id}.lic`);
    writeFileSync(licenseFile, checkout.body.license_file);
    return { id: license.id, key: license.key, licenseFile };
  };
  const machines = async (license: FixtureLicense): Promise<MachineView[]> =>
    (await fixture.api('GET', `/api/machines?license_id=${license.id}`)).body as MachineView[];
  const migrations = async (): Promise<AuditEntry[]> => (await fixture.api('GET', '/api/audit?action=machine.migrated')).body as AuditEntry[];
  const validate = (license: FixtureLicense, body: Record<string, unknown>) =>
    fixture.api('POST', '/api/v1/validate', { license_key: license.key, version: '2.1.0', ...body });
  const withServerStopped = async <T>(work: () => Promise<T>): Promise<T> => {
    await fixture.stopServer();
    try {
      return await work();
    } finally {
      await fixture.startServer();
    }
  };

  it('the Node client: one machine before and after, audited; the hw1 .lic still verifies and unseals', async () => {
    const license = await singleSeatLicense(hw1);
    const cacheDir = path.join(fixture.work, 'cache-node');
    const old = fixture.client({ hardwareId: hw1, offline: { cacheDir } }, license);
    const before = await old.validate();
    assert.equal(before.valid, true, before.reason);
    const [machine] = await machines(license);
    assert.equal(machine!.hardware_id, hw1);

    const client = fixture.client({ hardwareId: undefined, offline: { cacheDir } }, license);
    assert.equal(client.hardwareId, hw2);
    const after = await client.validate();
    assert.equal(after.valid, true, after.reason);
    assert.equal(after.source, 'online');
    assert.deepEqual(after.decryptionKey, before.decryptionKey, 'the key sealed for the hw2 ID');
    const moved = await machines(license);
    assert.equal(moved.length, 1, 'no second machine on a license for one');
    assert.equal(moved[0]!.id, machine!.id, 'the same machine record');
    assert.equal(moved[0]!.hardware_id, hw2);
    assert.ok(moved[0]!.holds_seat);
    const audit = (await migrations()).filter((entry) => entry.entity_id === machine!.id);
    assert.equal(audit.length, 1);
    assert.deepEqual(audit[0]!.details, { license_id: license.id, hardware_id: hw2, previous_hardware_id: hw1 });
    const [licenseDir] = readdirSync(cacheDir);
    assert.deepEqual(JSON.parse(readFileSync(path.join(cacheDir, licenseDir!, 'hardware-id.json'), 'utf8')), { hardware_id: hw2, previous_hardware_id: hw1 });

    // Validated again: nothing moves twice, and no other machine gets in.
    assert.equal((await client.validate()).valid, true);
    assert.equal((await migrations()).filter((entry) => entry.entity_id === machine!.id).length, 1);
    assert.equal((await validate(license, { hardware_id: 'another-machine' })).body.reason, 'MACHINE_LIMIT_EXCEEDED');

    await withServerStopped(async () => {
      const offline = await client.validate();
      assert.equal(offline.valid, true, JSON.stringify(offline.failures));
      assert.equal(offline.source, 'license-file', 'the .lic bound to the hw1 ID');
      assert.deepEqual(offline.decryptionKey, before.decryptionKey, 'its key unsealed with the hw1 ID');
      const stranger = fixture.client({ hardwareId: 'hw1-0000000000000000000000000000000000000000', offline: { cacheDir: path.join(fixture.work, 'cache-stranger') } }, license);
      assert.equal((await stranger.validate()).failures.find((failure) => failure.tier === 'license-file')?.code, 'HARDWARE_MISMATCH');
    });
  });

  it('an online-only Node client sends the hw1 ID it derives at its first start', async () => {
    const license = await singleSeatLicense();
    assert.equal((await validate(license, { hardware_id: hw1 })).body.valid, true, 'the older client, online only');
    const client = fixture.client({ hardwareId: undefined, offline: { enabled: false } }, license);
    assert.equal((await client.validate()).valid, true);
    const after = await machines(license);
    assert.deepEqual(after.map((machine) => machine.hardware_id), [hw2]);
    assert.equal((await migrations()).filter((entry) => entry.entity_id === after[0]!.id).length, 1);
  });

  it('moves a machine once when validations race, and ignores a previous ID that is no active hw1 machine of the license', async () => {
    const license = await singleSeatLicense();
    const old = `hw1-${randomBytes(20).toString('hex')}`;
    const next = `hw2-${randomBytes(32).toString('hex')}`;
    assert.equal((await validate(license, { hardware_id: old })).body.valid, true);
    const [machine] = (await machines(license)).filter((m) => m.hardware_id === old);
    const answers = await Promise.all(Array.from({ length: 8 }, () => validate(license, { hardware_id: next, previous_hardware_id: old })));
    for (const answer of answers) {
      assert.equal(answer.status, 200);
      assert.equal(answer.body.valid, true, JSON.stringify(answer.body));
      assert.equal(answer.body.machine_id, machine!.id);
    }
    assert.equal((await migrations()).filter((entry) => entry.entity_id === machine!.id).length, 1, 'moved once');
    assert.deepEqual((await machines(license)).map((m) => m.hardware_id), [next]);

    // No machine of the license has the previous ID: a new machine, refused for the seat.
    const unknown = await validate(license, { hardware_id: `hw2-${randomBytes(32).toString('hex')}`, previous_hardware_id: `hw1-${randomBytes(20).toString('hex')}` });
    assert.equal(unknown.body.reason, 'MACHINE_LIMIT_EXCEEDED');
    // Only from hw1 to hw2: a custom previous ID moves nothing.
    const custom = await validate(license, { hardware_id: `hw2-${randomBytes(32).toString('hex')}`, previous_hardware_id: next });
    assert.equal(custom.body.reason, 'MACHINE_LIMIT_EXCEEDED');
    // A malformed one is the request's error, named as such.
    const bad = await validate(license, { hardware_id: next, previous_hardware_id: '' });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body.error.code, 'INVALID_HARDWARE_ID');
    assert.match(bad.body.error.message, /^previous_hardware_id must not be empty/);
  });

  it('moves a deactivated hw1 machine deactivated: upgrading the client does not undo the deactivation', async () => {
    const license = await singleSeatLicense();
    const old = `hw1-${randomBytes(20).toString('hex')}`;
    await validate(license, { hardware_id: old });
    const [machine] = (await machines(license)).filter((m) => m.hardware_id === old);
    assert.equal((await fixture.api('POST', `/api/machines/${machine!.id}/deactivate`)).status, 200);
    const next = `hw2-${randomBytes(32).toString('hex')}`;
    const answer = await validate(license, { hardware_id: next, previous_hardware_id: old });
    assert.deepEqual([answer.body.valid, answer.body.reason], [false, 'MACHINE_DEACTIVATED']);
    const after = await machines(license);
    assert.deepEqual(after.map((m) => [m.id, m.hardware_id, m.active]), [[machine!.id, next, false]], 'the one record moved, still deactivated');
    assert.equal((await migrations()).filter((entry) => entry.entity_id === machine!.id).length, 1);
    // The operator's reactivation acts on the moved record: the new ID is then valid.
    assert.equal((await fixture.api('POST', `/api/machines/${machine!.id}/activate`)).status, 200);
    assert.equal((await validate(license, { hardware_id: next, previous_hardware_id: old })).body.valid, true);
  });

  describe('the Go client (examples/go)', function () {
    this.timeout(600_000);
    let binary: string;

    before(function () {
      if (spawnSync('go', ['version'], { env: goEnv }).status !== 0) {
        if (process.env.CI === 'true') throw new Error('go is not installed (Debian package golang-go)');
        this.skip();
      }
      binary = path.join(fixture.work, 'check-license');
      execFileSync('go', ['build', '-o', binary, '.'], { cwd: exampleDir, env: goEnv, stdio: 'pipe' });
    });

    it('one machine before and after, audited; the hw1 .lic still verifies and unseals', async () => {
      const license = await singleSeatLicense(hw1);
      writeFileSync(path.join(fixture.work, 'signing-key.pem'), fixture.pem);
      const cacheDir = path.join(fixture.work, 'cache-go');
      mkdirSync(cacheDir, { recursive: true });
      const env = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: fixture.work,
        LICENSE_SERVER: fixture.addr,
        LICENSE_KEY: license.key,
        PUBLIC_KEY_FILE: path.join(fixture.work, 'signing-key.pem'),
        LICENSE_FILE: license.licenseFile,
        CACHE_DIR: cacheDir,
      };
      const example = async (extra: Record<string, string> = {}) => (await run(binary, [], { env: { ...env, ...extra }, timeout: 60_000 })).stdout;

      const before = await example({ HARDWARE_ID: hw1 });
      assert.match(before, /^license valid \(online\)$/m);
      const key = /^decryption key: available \(32 bytes, SHA-256 ([0-9a-f]{64})\)$/m.exec(before)?.[1];
      assert.ok(key, before);
      const [machine] = await machines(license);

      const after = await example();
      assert.match(after, new RegExp(`^hardware ID: ${hw2}$`, 'm'));
      assert.match(after, /^license valid \(online\)$/m);
      assert.match(after, new RegExp(`SHA-256 ${key}\\)$`, 'm'));
      const moved = await machines(license);
      assert.deepEqual(moved.map((m) => [m.id, m.hardware_id]), [[machine!.id, hw2]], 'one machine, the same record');
      const audit = (await migrations()).filter((entry) => entry.entity_id === machine!.id);
      assert.deepEqual(audit.map((entry) => entry.details), [{ license_id: license.id, hardware_id: hw2, previous_hardware_id: hw1 }]);
      const [licenseDir] = readdirSync(cacheDir);
      assert.deepEqual(JSON.parse(readFileSync(path.join(cacheDir, licenseDir!, 'hardware-id.json'), 'utf8')), { hardware_id: hw2, previous_hardware_id: hw1 });

      await withServerStopped(async () => {
        const offline = await example();
        assert.match(offline, /^license valid \(offline, from the license-file\)$/m);
        assert.match(offline, new RegExp(`SHA-256 ${key}\\)$`, 'm'), 'the hw1 file unsealed');
      });
    });
  });
});
