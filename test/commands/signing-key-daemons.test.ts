import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const KEK = 'b3'.repeat(32);
const OTHER_KEK = 'c4'.repeat(32);

/**
 * Issue 23, item 13: `signing-key protect` beside a running daemon that lacks the
 * key-encryption key no longer sets a trap (the daemon signing on from memory until its next
 * start, which then fails): every `serve` publishes which key-encryption key it holds,
 * protect refuses while one could not open the sealed keys (SIGNING_KEK_NOT_IN_DAEMON)
 * unless --force, and such a daemon stops signing at once instead of at its restart.
 */
forEachEngine('signing-key protect beside running daemons', (fixture) => {
  let work: string;
  let url: string;
  let token: string;
  let licenseId: string;
  const serves: ServeProcess[] = [];
  const env = (kek?: string) => ({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'backups'), ...(kek ? { LICENSE_SIGNING_KEY_ENCRYPTION_KEY: kek } : {}) });
  const cli = (args: string[], kek?: string) => runCli(args, { env: env(kek), cwd: work });
  const serve = async (kek?: string) => {
    const started = await startServe(env(kek));
    serves.push(started);
    return started;
  };
  const checkout = (daemon: ServeProcess) => api(daemon.url, 'POST', `/api/licenses/${licenseId}/checkout`, { token, body: { ttl_days: 5 } });
  const sealedStates = async () => ok(await cli(['signing-key', 'list', '--json'])).json().map((key: { sealed: boolean }) => key.sealed);

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-protect-daemons-'));
    url = await fixture.freshUrl();
    ok(await cli(['init']));
    token = ok(await cli(['token', 'create', '--name', 'ops', '--json'])).json().token;
    const customer = ok(await cli(['customer', 'create', '--name', 'Initech', '--json'])).json().id;
    licenseId = ok(await cli(['license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--json'])).json().id;
  });
  after(async () => {
    for (const daemon of serves) await daemon.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('is refused while a daemon without the key-encryption key (or with another) runs, naming them, and seals nothing', async function () {
    this.timeout(60_000);
    const bare = await serve();
    const refused = await cli(['signing-key', 'protect'], KEK);
    assert.equal(refused.code, 6, refused.stderr);
    assert.match(refused.stderr, /\(SIGNING_KEK_NOT_IN_DAEMON\)/);
    assert.match(refused.stderr, /a daemon without a key-encryption key/);
    // Named by its process as DATABASE_IN_USE names it, not by the server's backend (PostgreSQL), or by the file it holds (SQLite).
    assert.match(refused.stderr, fixture.engine === 'postgres' ? new RegExp(`license-server serve: process ${bare.child.pid} on `) : /holding .*\.daemon-kek-none/);
    assert.match(refused.stderr, /nothing was sealed/);
    assert.match(refused.stderr, /--force/);
    assert.ok(!refused.stderr.includes(KEK));
    assert.deepEqual(await sealedStates(), [false]);
    assert.equal((await checkout(bare)).status, 200, 'the daemon signs as before');

    const other = await serve(OTHER_KEK);
    const both = await cli(['signing-key', 'protect'], KEK);
    assert.equal(both.code, 6, both.stderr);
    assert.match(both.stderr, /2 running daemons/);
    assert.match(both.stderr, /a daemon with another key-encryption key/);
    await other.stop();
    assert.deepEqual(await sealedStates(), [false]);
  });

  it('with --force it seals, names the daemon in a warning, and that daemon stops signing at once (not at its next start)', async function () {
    this.timeout(60_000);
    const bare = serves[0]!;
    const forced = ok(await cli(['signing-key', 'protect', '--force', '--json'], KEK)).json();
    assert.equal(forced.changed.length, 1);
    assert.equal(forced.daemons_without_key.length, 1);
    assert.match(forced.daemons_without_key[0], /without a key-encryption key/);
    const text = ok(await cli(['signing-key', 'unprotect'], KEK));
    assert.match(text.stdout, /Unsealed 1/);
    const again = ok(await cli(['signing-key', 'protect', '--force'], KEK));
    assert.match(again.stderr, /^warning: a daemon without a key-encryption key.* can no longer sign: restart it with signing\.key_encryption_key set/m);
    assert.deepEqual(await sealedStates(), [true]);

    const refused = await checkout(bare);
    assert.equal(refused.status, 500);
    assert.equal(refused.body.error.code, 'SIGNING_KEK_REQUIRED');
    const ready = await api(bare.url, 'GET', '/readyz');
    assert.equal(ready.status, 503);
    assert.match(ready.body.error.message, /this daemon cannot sign: signing key [0-9a-f]{16} is sealed/);
    await bare.stop();
  });

  it('goes ahead at once beside a daemon that holds the key-encryption key, which signs on; a stopped daemon is no longer counted', async function () {
    this.timeout(60_000);
    const holder = await serve(KEK);
    ok(await cli(['signing-key', 'unprotect'], KEK));
    assert.equal((await checkout(holder)).status, 200);
    const sealed = ok(await cli(['signing-key', 'protect', '--json'], KEK)).json();
    assert.deepEqual(sealed.daemons_without_key, []);
    assert.deepEqual(await sealedStates(), [true]);
    assert.equal((await checkout(holder)).status, 200, 'it opens the sealed key with its key-encryption key');
    assert.equal((await api(holder.url, 'GET', '/readyz')).status, 200);
    await holder.stop();
  });
});
