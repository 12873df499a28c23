import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeLicenseFile } from '../../src/lib/offline/format.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe } from '../support/serve.js';
import { holdsSeed, relationFiles, storedBytes } from '../support/stored-bytes.js';

const TOKEN = 'backup-signing-keys-token-0123456789';

/**
 * Issue 23, item 5: a restore never brings a signing key's past back. A key retired after
 * the backup stays retired (its private key gone, and never active again), a key made after
 * the backup is carried across and signs on, and a backup of another server, whose key set
 * and admin tokens replace this one's, is named as such before and after.
 */
forEachEngine('restore and the signing keys made or retired after the backup', (fixture) => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-restore-keys-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  async function store(name: string) {
    const url = await fixture.freshUrl();
    const env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, name, 'backups'), LICENSE_ADMIN_TOKEN: TOKEN };
    const cli = (args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli(['init']));
    const customer = ok(await cli(['customer', 'create', '--name', 'Umbrella', '--json'])).json().id;
    const licenseId = ok(await cli(['license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--json'])).json().id as string;
    const keys = async () => ok(await cli(['signing-key', 'list', '--json'])).json() as Array<{ key_id: string; state: string; public_key_pem: string }>;
    /** Checks a license out and returns the key id it was signed with, verified against that key's PEM. */
    const signedBy = async () => {
      const file = path.join(work, `${name}-${randomUUID()}.lic`);
      ok(await cli(['license', 'checkout', licenseId, '--ttl-days', '5', '--out', file]));
      const keyId = decodeLicenseFile(readFileSync(file)).payload.key_id!;
      verifyLicenseFile(readFileSync(file), { publicKey: (await keys()).find((key) => key.key_id === keyId)!.public_key_pem });
      return keyId;
    };
    const seedOf = async (keyId: string) => {
      const db = await openDatabase(url);
      try {
        return Buffer.from((await db.query('SELECT private_key FROM signing_keys WHERE key_id = ?', [keyId]))[0]!.private_key as Uint8Array);
      } finally {
        await db.close();
      }
    };
    return { url, env, cli, keys, signedBy, seedOf, licenseId };
  }

  it('keeps a key retired after the backup retired and lets the key rotated to sign on; the report, its text and the audit entry list both', async () => {
    const { url, cli, keys, signedBy, seedOf } = await store('retired');
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    const rotated = ok(await cli(['signing-key', 'rotate', '--json'])).json();
    const [old, current] = [rotated.previous.key_id as string, rotated.active.key_id as string];
    const oldSeed = await seedOf(old);
    ok(await cli(['signing-key', 'retire', old, '--force']));
    const unconfirmed = await cli(['backup', 'restore', backup.backup_id]);
    assert.equal(unconfirmed.code, 2);
    assert.doesNotMatch(unconfirmed.stderr, /another server/, 'a backup of this server is not called another one\'s');

    const report = ok(await cli(['backup', 'restore', backup.backup_id, '--yes', '--json'])).json();
    assert.deepEqual((await keys()).map((key) => [key.key_id, key.state]), [[old, 'retired'], [current, 'active']]);
    assert.equal(await signedBy(), current, 'the key rotated to signs, not the retired one');
    assert.deepEqual(report.signing_keys, {
      another_server: false,
      changes: [
        { key_id: old, before: 'retired', backup: 'active', after: 'retired' },
        { key_id: current, before: 'active', backup: null, after: 'active' },
      ],
      erase_warning: null,
    });
    assert.equal(report.signing_key_warning, null);
    // The backup held the retired key's private key: the restored files do not.
    assert.ok(!holdsSeed(await storedBytes(fixture.engine, url, await relationFiles(fixture.engine, url)), oldSeed), 'the retired key\'s seed is not in the restored database files');

    const text = ok(await cli(['backup', 'restore', backup.backup_id, '--yes']));
    assert.match(text.stdout, new RegExp(`^signing key ${old}: retired \\(before the restore: retired; in the backup: active\\)$`, 'm'));
    assert.match(text.stdout, new RegExp(`^signing key ${current}: active \\(before the restore: active; in the backup: not in it\\)$`, 'm'));
    const [audit] = ok(await cli(['audit', 'list', '--action', 'backup.restored', '--json'])).json();
    assert.deepEqual(audit.details.signing_keys.changes.map((change: { key_id: string }) => change.key_id), [old, current]);
  });

  it('through a daemon: carries a key made after the backup, which signs on, the old one verifying only; the dry run says so first', async function () {
    this.timeout(60_000);
    const { env, cli, keys } = await store('carried');
    const backup = ok(await cli(['backup', 'create', '--json'])).json();
    const rotated = ok(await cli(['signing-key', 'rotate', '--json'])).json();
    const [old, current] = [rotated.previous.key_id as string, rotated.active.key_id as string];
    const expected = [
      { key_id: old, before: 'verify-only', backup: 'active', after: 'verify-only' },
      { key_id: current, before: 'active', backup: null, after: 'active' },
    ];
    const serve = await startServe(env);
    try {
      const preview = await api(serve.url, 'POST', `/api/backups/${backup.backup_id}/restore`, { token: TOKEN, body: { dry_run: true } });
      assert.equal(preview.status, 200, preview.text);
      assert.deepEqual(preview.body, { backup_id: backup.backup_id, created_at: backup.created_at, dry_run: true, signing_keys: { another_server: false, changes: expected } });
      const restored = await api(serve.url, 'POST', `/api/backups/${backup.backup_id}/restore`, { token: TOKEN, body: { confirm: backup.backup_id } });
      assert.equal(restored.status, 200, restored.text);
      assert.deepEqual(restored.body.signing_keys, { another_server: false, changes: expected, erase_warning: null });
      const license = (await api(serve.url, 'GET', '/api/licenses', { token: TOKEN })).body[0];
      const checkout = await api(serve.url, 'POST', `/api/licenses/${license.id}/checkout`, { token: TOKEN, body: { ttl_days: 5 } });
      assert.equal(checkout.status, 200, checkout.text);
      assert.equal(decodeLicenseFile(Buffer.from(checkout.body.license_file, 'utf8')).payload.key_id, current);
      const set = (await api(serve.url, 'GET', '/api/signing-keys', { token: TOKEN })).body.keys.map((key: { key_id: string; state: string }) => [key.key_id, key.state]);
      assert.deepEqual(set, [[current, 'active'], [old, 'verify-only']]);
    } finally {
      await serve.stop();
    }
    assert.deepEqual((await keys()).map((key) => key.state), ['verify-only', 'active']);
  });

  it('names another server\'s backup before (the refusal without --yes, --dry-run) and after (the report): its keys and admin tokens replace this server\'s, only with --replace-keys', async () => {
    const here = await store('here');
    const there = await store('there');
    const backup = ok(await there.cli(['backup', 'create', '--json'])).json();
    const [ours] = await here.keys();
    const [theirs] = await there.keys();
    ok(await here.cli(['token', 'create', '--name', 'ops-here']));
    const copied = path.join(work, 'copied');
    mkdirSync(copied, { recursive: true });
    const file = path.join(copied, backup.file);
    copyFileSync(path.join(work, 'there', 'backups', backup.file), file);

    const refused = await here.cli(['backup', 'restore', file]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /\(RESTORE_NOT_CONFIRMED\)/);
    assert.match(refused.stderr, new RegExp(`pass --yes; backup ${backup.backup_id} is another server's \\(it shares no signing key with this one\\): its signing keys and admin tokens would replace this server's, which needs --replace-keys too`));
    const dry = ok(await here.cli(['backup', 'restore', file, '--dry-run', '--json'])).json();
    const changes = [
      { key_id: ours!.key_id, before: 'active', backup: null, after: null },
      { key_id: theirs!.key_id, before: null, backup: 'active', after: 'active' },
    ];
    assert.deepEqual(dry.signing_keys, { another_server: true, changes });
    const dryText = ok(await here.cli(['backup', 'restore', file, '--dry-run']));
    assert.match(dryText.stderr, /^warning: backup \S+ is another server's .*would replace this server's$/m);
    assert.deepEqual((await here.keys()).map((key) => key.key_id), [ours!.key_id], 'a dry run changes nothing');

    // --yes confirms the restore, never the replacement of this server's keys and tokens (issue 35, item 1).
    const unconfirmed = await here.cli(['backup', 'restore', file, '--yes']);
    assert.equal(unconfirmed.code, 2, unconfirmed.stderr);
    assert.match(unconfirmed.stderr, /\(RESTORE_KEYS_NOT_CONFIRMED\)/);
    assert.deepEqual((await here.keys()).map((key) => key.key_id), [ours!.key_id], 'a refused restore changes nothing');
    const restored = ok(await here.cli(['backup', 'restore', file, '--yes', '--replace-keys']));
    assert.match(restored.stderr, new RegExp(`^warning: backup ${backup.backup_id} is another server's \\(it shares no signing key with this one\\): its signing keys and admin tokens replaced this server's$`, 'm'));
    assert.match(restored.stdout, new RegExp(`^signing key ${ours!.key_id}: removed from the key set \\(before the restore: active; in the backup: not in it\\)$`, 'm'));
    const [audit] = ok(await here.cli(['audit', 'list', '--action', 'backup.restored', '--json'])).json();
    assert.deepEqual(audit.details.signing_keys, { another_server: true, changes });
    assert.deepEqual((await here.keys()).map((key) => key.key_id), [theirs!.key_id]);
    assert.deepEqual(ok(await here.cli(['token', 'list', '--all', '--json'])).json(), [], 'this server\'s admin tokens were replaced by the backup\'s (none)');
    const signed = path.join(work, 'theirs.lic');
    ok(await here.cli(['license', 'checkout', there.licenseId, '--ttl-days', '5', '--out', signed]));
    verifyLicenseFile(readFileSync(signed), { publicKey: theirs!.public_key_pem });
  });

  /** A backup of a store at schema 4, before keys had ids and states (and before manifests listed them), with one key. */
  async function schema4Backup(name: string) {
    const { migrate } = await import('../../src/lib/storage/migrations.js');
    const { createBackup } = await import('../../src/lib/backup/create.js');
    const { resolveConfig } = await import('../../src/lib/config/resolve.js');
    const { ed25519 } = await import('@noble/curves/ed25519.js');
    const source = await fixture.freshUrl();
    const env = { LICENSE_DATABASE_URL: source, LICENSE_BACKUP_PATH: path.join(work, name, 'backups'), LICENSE_ADMIN_TOKEN: TOKEN };
    const db = await openDatabase(source, { migrate: false });
    const seed = ed25519.utils.randomSecretKey();
    try {
      await migrate(db, 4);
      await db.execute("INSERT INTO signing_keys (id, algorithm, public_key, private_key, is_current, created_at) VALUES (?, 'Ed25519', ?, ?, ?, '2026-01-01T00:00:00.000Z')", [
        randomUUID(),
        ed25519.getPublicKey(seed),
        seed,
        true,
      ]);
      const record = await createBackup({ db, config: await resolveConfig({ env, cwd: work }), trigger: 'manual', toolVersion: 'old', context: { actor: 'test' } });
      assert.equal(record.schema_version, 4);
      assert.equal(record.signing_keys, undefined, 'a schema 4 store lists no keys in the manifest');
      return { env, backupId: record.backup_id, file: path.join(env.LICENSE_BACKUP_PATH, record.file), seed };
    } finally {
      await db.close();
    }
  }

  it('keeps a key retired after a backup older than schema 5 retired (merged once the backup is migrated)', async () => {
    const { env, backupId, seed } = await schema4Backup('v4');
    const target = await fixture.freshUrl();
    const targetEnv = { ...env, LICENSE_DATABASE_URL: target };
    const cli = (args: string[]) => runCli(args, { env: targetEnv, cwd: work });
    ok(await cli(['backup', 'restore', backupId, '--yes']));
    const rotated = ok(await cli(['signing-key', 'rotate', '--json'])).json();
    ok(await cli(['signing-key', 'retire', rotated.previous.key_id, '--force']));
    const report = ok(await cli(['backup', 'restore', backupId, '--yes', '--json'])).json();
    assert.ok(report.migrated_to > report.schema_version);
    assert.deepEqual(ok(await cli(['signing-key', 'list', '--json'])).json().map((key: { key_id: string; state: string }) => [key.key_id, key.state]), [
      [rotated.previous.key_id, 'retired'],
      [rotated.active.key_id, 'active'],
    ]);
    assert.deepEqual(report.signing_keys.changes.map((change: { key_id: string; after: string }) => [change.key_id, change.after]), [
      [rotated.previous.key_id, 'retired'],
      [rotated.active.key_id, 'active'],
    ]);
    assert.equal(report.signing_keys.erase_warning, null);
    const chunks = await storedBytes(fixture.engine, target, await relationFiles(fixture.engine, target));
    assert.ok(!holdsSeed(chunks, Buffer.from(seed)), 'the retired key\'s seed is not in the restored database files');
  });

  it('decides from the data, before anything is taken, that a backup listing no keys (older than schema 5) is another server\'s', async () => {
    const { file, backupId } = await schema4Backup('v4-foreign');
    const here = await store('here-v4');
    const ours = (await here.keys()).map((key) => key.key_id);
    const refused = await here.cli(['backup', 'restore', file, '--yes']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, new RegExp(`backup ${backupId} is another server's .*\\(RESTORE_KEYS_NOT_CONFIRMED\\)`));
    assert.deepEqual((await here.keys()).map((key) => key.key_id), ours);
    assert.deepEqual(ok(await here.cli(['backup', 'list', '--json'])).json(), [], 'no pre-restore backup was taken');
    const report = ok(await here.cli(['backup', 'restore', file, '--yes', '--replace-keys', '--json'])).json();
    assert.equal(report.signing_keys.another_server, true);
    assert.notDeepEqual((await here.keys()).map((key) => key.key_id), ours);
  });

  it('refuses a backup whose key has one of this server\'s key ids with another public key: it would pass for this server\'s and retire its key', async () => {
    const here = await store('forged-here');
    const forger = await store('forger');
    const [ours] = await here.keys();
    const { ed25519 } = await import('@noble/curves/ed25519.js');
    const db = await openDatabase(forger.url);
    try {
      // Our key id (public, in the key set), with the forger's own public key, retired.
      await db.execute(
        `INSERT INTO signing_keys (id, key_id, algorithm, public_key, private_key, sealed_with, key_id_in_files, is_current, created_at, deactivated_at, retired_at)
         VALUES (?, ?, 'Ed25519', ?, NULL, NULL, ?, ?, '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z', '2026-01-03T00:00:00.000Z')`,
        [randomUUID(), ours!.key_id, ed25519.getPublicKey(ed25519.utils.randomSecretKey()), true, false],
      );
    } finally {
      await db.close();
    }
    const forged = ok(await forger.cli(['backup', 'create', '--json'])).json();
    const file = path.join(work, 'forger', 'backups', forged.file);
    const refused = await here.cli(['backup', 'restore', file, '--yes']);
    assert.equal(refused.code, 13, refused.stderr);
    assert.match(refused.stderr, new RegExp(`signing key ${ours!.key_id} has another public key than this server's key of that id.*\\(BACKUP_CORRUPT\\)`));
    assert.deepEqual((await here.keys()).map((key) => [key.key_id, key.state]), [[ours!.key_id, 'active']], 'this server\'s key is as it was');
  });
});
