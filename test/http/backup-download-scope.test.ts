import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * Who may take a backup's archive. An unencrypted one holds the raw Ed25519 seed, every license
 * key and every decryption key: `admin` only. An encrypted one is useless without the backup
 * key, which no token can obtain: `backups` may take it.
 */
forEachEngine('backup downloads by scope', (fixture) => {
  let work: string;
  let databaseUrl: string;
  let plain: ServeProcess;
  let sealed: ServeProcess;
  let admin: string;
  const token = async (name: string, scopes: string[]) =>
    ok(await runCli(['token', 'create', '--name', name, ...scopes.flatMap((scope) => ['--scope', scope]), '--json'], { env: { LICENSE_DATABASE_URL: databaseUrl } })).json().token as string;
  const download = async (base: string, id: string, bearer: string) => {
    const response = await fetch(`${base}/api/backups/${id}/download`, { headers: { authorization: `Bearer ${bearer}` } });
    return { status: response.status, bytes: Buffer.from(await response.arrayBuffer()) };
  };
  const downloadsAudited = async (id: string) => (await api(plain.url, 'GET', `/api/audit?action=backup.downloaded&entity_id=${id}`, { token: admin })).body.length as number;

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-download-scope-'));
    databaseUrl = await fixture.freshUrl();
    // Two daemons on one database: one makes plain backups (no key, the default), one encrypted ones.
    plain = await startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_BACKUP_PATH: path.join(work, 'plain') });
    sealed = await startServe({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_BACKUP_PATH: path.join(work, 'sealed'), LICENSE_BACKUP_ENCRYPTION_KEY: 'ab'.repeat(32) });
    admin = plain.token!;
  });
  after(async () => {
    for (const serve of [plain, sealed]) await serve?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('refuses an unencrypted archive to every token without admin (403 BACKUP_UNENCRYPTED, nothing sent or audited) and gives it to admin', async () => {
    const ci = await token(`ci-${fixture.engine}`, ['backups']);
    const wide = await token(`wide-${fixture.engine}`, ['read', 'licenses', 'backups', 'restore']);
    const created = await api(plain.url, 'POST', '/api/backups', { token: ci });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.encrypted, false);
    const id = created.body.backup_id as string;
    for (const bearer of [ci, wide]) {
      const refused = await download(plain.url, id, bearer);
      assert.equal(refused.status, 403);
      const error = JSON.parse(refused.bytes.toString('utf8')).error;
      assert.equal(error.code, 'BACKUP_UNENCRYPTED');
      assert.match(error.message, /not encrypted.*private signing key.*only a token with the scope "admin"/);
    }
    assert.equal(await downloadsAudited(id), 0, 'a refused download is no download');
    const taken = await download(plain.url, id, admin);
    assert.equal(taken.status, 200);
    assert.deepEqual(taken.bytes, readFileSync(path.join(work, 'plain', created.body.file)));
    assert.equal(await downloadsAudited(id), 1);
  });

  it('decides from the archive\'s bytes, not from its index: an unencrypted archive listed as encrypted is still refused', async () => {
    const ci = await token(`ci-index-${fixture.engine}`, ['backups']);
    const created = (await api(plain.url, 'POST', '/api/backups', { token: admin })).body;
    const directory = path.join(work, 'plain');
    const index = JSON.parse(readFileSync(path.join(directory, `${created.backup_id}.backup.json`), 'utf8'));
    renameSync(path.join(directory, created.file), path.join(directory, `${created.file}.enc`));
    writeFileSync(path.join(directory, `${created.backup_id}.backup.json`), JSON.stringify({ ...index, encrypted: true, file: `${created.file}.enc` }));
    const listed = (await api(plain.url, 'GET', '/api/backups', { token: ci })).body.backups.find((backup: { backup_id: string }) => backup.backup_id === created.backup_id);
    assert.equal(listed.encrypted, true, 'the index says encrypted');
    const refused = await download(plain.url, created.backup_id, ci);
    assert.equal(refused.status, 403);
    assert.equal(JSON.parse(refused.bytes.toString('utf8')).error.code, 'BACKUP_UNENCRYPTED');
  });

  it('gives an encrypted archive to a backups token', async () => {
    const ci = await token(`ci-sealed-${fixture.engine}`, ['backups']);
    const created = await api(sealed.url, 'POST', '/api/backups', { token: ci });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.encrypted, true);
    const taken = await download(sealed.url, created.body.backup_id, ci);
    assert.equal(taken.status, 200);
    assert.equal(taken.bytes.subarray(0, 4).toString('ascii'), 'LSBK');
    assert.deepEqual(taken.bytes, readFileSync(path.join(work, 'sealed', created.body.file)));
  });
});
