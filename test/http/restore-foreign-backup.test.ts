import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const KEY = '5e'.repeat(32);

/**
 * Issue 35, item 1: a backup of another, key-less store planted on an off-site target took a
 * server with a backup key over through a `restore` token: the attacker's token became admin,
 * the operators' tokens were refused and the key set was the attacker's. Now an unencrypted
 * archive comes from a target only when it says allow_unencrypted: true, replacing the key set
 * and tokens needs its own confirmation ("replace_keys"), and that needs the scope admin.
 */
forEachEngine('a foreign backup planted on an off-site target, restored through the API', (fixture) => {
  let work: string;
  let serve: ServeProcess | undefined;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-foreign-'));
  });
  after(async () => {
    await serve?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('refuses the unencrypted archive from a target that does not allow it, and another server\'s keys without replace_keys from an admin token', async function () {
    this.timeout(300_000);
    // The attacker: a store of their own, without a backup key, with an admin token of theirs.
    const attackerEnv = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(work, 'attacker', 'backups') };
    const attacker = (args: string[]) => runCli(args, { env: attackerEnv, cwd: work });
    ok(await attacker(['init']));
    const attackerToken = ok(await attacker(['token', 'create', '--name', 'mallory', '--scope', 'admin', '--json'])).json().token as string;
    const planted = ok(await attacker(['backup', 'create', '--json'])).json();
    assert.equal(planted.encrypted, false);

    // The server: a backup key, a file target shared with others, an operator and a restore token.
    const nas = path.join(work, 'nas');
    mkdirSync(nas);
    const backups = path.join(work, 'server', 'backups');
    const serverEnv = {
      LICENSE_DATABASE_URL: await fixture.freshUrl(),
      LICENSE_BACKUP_PATH: backups,
      LICENSE_BACKUP_ENCRYPTION_KEY: KEY,
      LICENSE_BACKUP_TARGETS: JSON.stringify([
        { name: 'nas', kind: 'file', path: nas },
        { name: 'trusted', kind: 'file', path: nas, allow_unencrypted: true },
      ]),
    };
    const server = (args: string[]) => runCli(args, { env: serverEnv, cwd: work });
    ok(await server(['init']));
    const operator = ok(await server(['token', 'create', '--name', 'ops', '--scope', 'admin', '--json'])).json().token as string;
    const restorer = ok(await server(['token', 'create', '--name', 'restorer', '--scope', 'restore', '--json'])).json().token as string;
    for (const name of [planted.file, `${planted.backup_id}.backup.json`]) copyFileSync(path.join(attackerEnv.LICENSE_BACKUP_PATH, name), path.join(nas, name));

    serve = await startServe(serverEnv);
    const call = (token: string, method: string, route: string, body?: unknown) => api(serve!.url, method, route, { token, ...(body === undefined ? {} : { body }) });
    const keySet = async () => ((await api(serve!.url, 'GET', '/.well-known/jwks.json')).body.keys as Array<{ kid: string }>).map((key) => key.kid).sort();
    const ours = await keySet();
    const backupsHere = () => (existsSync(backups) ? readdirSync(backups) : []);
    const untouched = async (why: string) => {
      assert.equal((await call(operator, 'GET', '/api/whoami')).status, 200, `${why}: the operator's token still works`);
      assert.equal((await call(attackerToken, 'GET', '/api/whoami')).status, 401, `${why}: the attacker's token is refused`);
      assert.deepEqual(await keySet(), ours, `${why}: the key set is this server's`);
      assert.ok(!backupsHere().some((name) => name.startsWith(planted.backup_id)), `${why}: nothing of the planted backup is in backup.path: ${backupsHere().join(', ')}`);
    };
    const restorePath = `/api/backups/${planted.backup_id}/restore`;

    // The attack as reported: the rehearsal and the restore by id from the target, with a restore token.
    const dry = await call(restorer, 'POST', restorePath, { dry_run: true, target: 'nas' });
    assert.equal(dry.status, 422, dry.text);
    assert.equal(dry.body.error.code, 'BACKUP_UNENCRYPTED_REFUSED');
    const attack = await call(restorer, 'POST', restorePath, { target: 'nas', confirm: planted.backup_id });
    assert.equal(attack.status, 422, attack.text);
    assert.equal(attack.body.error.code, 'BACKUP_UNENCRYPTED_REFUSED');
    assert.match(attack.body.error.message, /allow_unencrypted/);
    await untouched('refused as unencrypted');

    // A target trusted with unencrypted backups: the backup is another server's, which `confirm` does not cover.
    const preview = await call(restorer, 'POST', restorePath, { dry_run: true, target: 'trusted' });
    assert.equal(preview.status, 200, preview.text);
    assert.equal(preview.body.signing_keys.another_server, true);
    const confirmedOnly = await call(restorer, 'POST', restorePath, { target: 'trusted', confirm: planted.backup_id });
    assert.equal(confirmedOnly.status, 400, confirmedOnly.text);
    assert.equal(confirmedOnly.body.error.code, 'RESTORE_KEYS_NOT_CONFIRMED');
    const restoreScope = await call(restorer, 'POST', restorePath, { target: 'trusted', confirm: planted.backup_id, replace_keys: true });
    assert.equal(restoreScope.status, 403, restoreScope.text);
    assert.equal(restoreScope.body.error.code, 'TOKEN_SCOPE');
    assert.match(restoreScope.body.error.message, /"admin"/);
    await untouched('refused without the key replacement confirmed by an admin');
    assert.equal((await call(operator, 'GET', '/api/backups')).body.backups.length, 0, 'no pre-restore backup was taken for a refused restore');

    // An admin who means it: the backup's keys and tokens replace this server's, as the report says.
    const meant = await call(operator, 'POST', restorePath, { target: 'trusted', confirm: planted.backup_id, replace_keys: true });
    assert.equal(meant.status, 200, meant.text);
    assert.equal(meant.body.signing_keys.another_server, true);
    assert.equal((await call(attackerToken, 'GET', '/api/whoami')).status, 200);
    assert.equal((await call(operator, 'GET', '/api/whoami')).status, 401);
    assert.notDeepEqual(await keySet(), ours);
  });

  it('answers a dry run with the wrong backup key as the restore does (issue 35, item 12)', async function () {
    this.timeout(120_000);
    const makerEnv = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(work, 'maker', 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: KEY };
    ok(await runCli(['init'], { env: makerEnv, cwd: work }));
    const made = ok(await runCli(['backup', 'create', '--json'], { env: makerEnv, cwd: work })).json();
    const backups = path.join(work, 'wrong-key', 'backups');
    mkdirSync(backups, { recursive: true });
    for (const name of [made.file, `${made.backup_id}.backup.json`]) copyFileSync(path.join(makerEnv.LICENSE_BACKUP_PATH, name), path.join(backups, name));
    const token = 'restore-foreign-wrong-key-token-0123456789';
    const daemon = await startServe({ LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: backups, LICENSE_BACKUP_ENCRYPTION_KEY: '71'.repeat(32), LICENSE_ADMIN_TOKEN: token });
    try {
      const dry = await api(daemon.url, 'POST', `/api/backups/${made.backup_id}/restore`, { token, body: { dry_run: true } });
      assert.equal(dry.status, 422, dry.text);
      assert.equal(dry.body.error.code, 'BACKUP_WRONG_KEY');
      const real = await api(daemon.url, 'POST', `/api/backups/${made.backup_id}/restore`, { token, body: { confirm: made.backup_id } });
      assert.equal(real.body.error?.code, 'BACKUP_WRONG_KEY', real.text);
    } finally {
      await daemon.stop();
    }
  });
});
