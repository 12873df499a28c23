import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { activationRequestFor } from '../support/activation-request.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

/**
 * A restore keeps the activation request nonces answered after the backup was made
 * (backup/revocations.ts): a request answered then cannot be altered to name another machine
 * and answered again because the store went back in time; the request itself still is.
 */
forEachEngine('restore keeps the activation requests answered after the backup', (fixture) => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-restore-requests-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('refuses the altered copy as replayed after the restore, and answers the request again', async function () {
    this.timeout(120_000);
    const env = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    const customer = ok(await cli('customer', 'create', '--name', 'Air-gapped Works', '--json')).json();
    const license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-12-31', '--json')).json();
    const backup = ok(await cli('backup', 'create', '--json')).json();

    const answered = activationRequestFor(license.key, 'hw2-bench');
    const altered = activationRequestFor(license.key, 'hw2-elsewhere', { nonce: answered.request.nonce, created_at: answered.request.created_at });
    writeFileSync(path.join(work, 'answered.txt'), answered.text);
    writeFileSync(path.join(work, 'altered.txt'), altered.text);
    const checkout = (request: string) => cli('license', 'checkout', license.id, '--ttl-days', '30', '--request', path.join(work, request), '--out', '-');
    ok(await checkout('answered.txt'));

    ok(await cli('backup', 'restore', backup.backup_id, '--yes', '--json'));
    const replayed = await checkout('altered.txt');
    assert.equal(replayed.code, 5, `${replayed.stdout}\n${replayed.stderr}`);
    assert.match(replayed.stderr, /ACTIVATION_REQUEST_REPLAYED/);
    assert.match(replayed.stderr, /already used for another hardware ID/);
    ok(await checkout('answered.txt'));
  });
});
