import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { runCli, type CliResult } from '../support/cli.js';

/**
 * A native module that crashes while the process tears down (better-sqlite3 12 on Node 24
 * did, after the work and sometimes before the output) turns a finished command into a
 * failed one, or a failed one into silence. Every command that writes something an operator
 * or a cron job relies on must exit 0 with its whole result, run after run, on every Node
 * this supports: 20 runs each on Node 24, where the abort was seen, 3 elsewhere.
 */
const RUNS = process.versions.node.startsWith('24.') ? 20 : 3;

describe(`exit status on Node ${process.versions.node}: ${RUNS} runs of each command that writes a result`, function () {
  this.timeout(RUNS * 20_000);
  let work: string;
  let env: Record<string, string>;
  let licenseKey: string;
  let backupId: string;
  const cli = (args: string[]) => runCli(args, { env, cwd: work });
  const done = (result: CliResult, what: string) => assert.equal(result.code, 0, `${what}: exit ${result.code}, signal or abort\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-exit-'));
    env = { LICENSE_DATA_DIR: path.join(work, 'data'), LICENSE_BACKUP_ENCRYPTION_KEY: 'cd'.repeat(32) };
    done(await cli(['init']), 'init');
    const customer = (await cli(['customer', 'create', '--name', 'Exit Ltd', '--json'])).json().id;
    done(await cli(['entitlement', 'create', '--code', 'seats', '--name', 'Seats']), 'entitlement');
    licenseKey = (await cli(['license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-01-01', '--entitlement', 'seats:5', '--json'])).json().key;
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('signing-key show prints the whole PEM and exits 0 every time', async () => {
    for (let run = 1; run <= RUNS; run += 1) {
      const result = await cli(['signing-key', 'show']);
      done(result, `run ${run}`);
      assert.match(result.stdout, /^-----BEGIN PUBLIC KEY-----\n[A-Za-z0-9+/=\n]+-----END PUBLIC KEY-----\n$/, `run ${run}`);
    }
  });

  it('license checkout writes a verifying .lic and exits 0 every time', async () => {
    const pem = (await cli(['signing-key', 'show'])).stdout;
    for (let run = 1; run <= RUNS; run += 1) {
      const out = path.join(work, `run-${run}.lic`);
      const result = await cli(['license', 'checkout', licenseKey, '--ttl-days', '7', '--out', out, '--json']);
      done(result, `run ${run}`);
      assert.equal(result.json().valid_until.length > 0, true);
      verifyLicenseFile(readFileSync(out), { publicKey: pem, now: new Date() });
    }
  });

  it('backup create and backup restore finish, report and exit 0 every time', async () => {
    for (let run = 1; run <= RUNS; run += 1) {
      const created = await cli(['backup', 'create', '--json']);
      done(created, `create ${run}`);
      backupId = created.json().backup_id;
      assert.ok(existsSync(path.join(work, 'data', 'backups', created.json().file)));
      const restored = await cli(['backup', 'restore', backupId, '--yes', '--json']);
      done(restored, `restore ${run}`);
      assert.equal(restored.json().backup_id, backupId);
    }
  });
});
