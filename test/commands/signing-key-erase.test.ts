import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { startServe, type ServeProcess } from '../support/serve.js';
import { holdsSeed as holds, relationFiles, storedBytes } from '../support/stored-bytes.js';

const KEK = 'a7'.repeat(32);

/**
 * Issue 23, item 6: a private key replaced by `protect` or deleted by `retire` leaves the
 * database files, also while a daemon keeps the database open (which put off SQLite's
 * checkpoint for thousands of writes), and not only as the row reads.
 */
forEachEngine('private keys replaced or deleted are erased from the database files', (fixture) => {
  let work: string;
  let url: string;
  let serve: ServeProcess | undefined;
  const env = () => ({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'backups'), LICENSE_SIGNING_KEY_ENCRYPTION_KEY: KEK });
  const cli = (args: string[]) => runCli(args, { env: env(), cwd: work });

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-erase-'));
    url = await fixture.freshUrl();
  });
  after(async () => {
    await serve?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const stored = (relationBefore: string[]) => storedBytes(fixture.engine, url, relationBefore);

  it('retire, then protect, with a daemon serving the database: neither seed stays in the SQLite file, its WAL or the PostgreSQL heap', async function () {
    this.timeout(60_000);
    // Unsealed keys made before the daemon starts; the daemon holds the key-encryption key, so protect goes ahead.
    const store = { ...env(), LICENSE_SIGNING_KEY_ENCRYPTION_KEY: '' };
    ok(await runCli(['init'], { env: store, cwd: work }));
    ok(await runCli(['signing-key', 'rotate'], { env: store, cwd: work }));
    const db = await openDatabase(url);
    let keys: Array<{ keyId: string; seed: Buffer }>;
    try {
      keys = (await db.query('SELECT key_id, private_key FROM signing_keys ORDER BY created_at')).map((row) => ({ keyId: String(row.key_id), seed: Buffer.from(row.private_key as Uint8Array) }));
    } finally {
      await db.close();
    }
    const [old, active] = keys as [{ keyId: string; seed: Buffer }, { keyId: string; seed: Buffer }];
    assert.equal(old.seed.length, 32);
    serve = await startServe(env());
    const before = await relationFiles(fixture.engine, url);
    assert.ok(holds(await stored(before), old.seed), 'the search finds a seed that is stored');

    const retired = ok(await cli(['signing-key', 'retire', old.keyId, '--force', '--json'])).json();
    assert.ok(!holds(await stored(before), old.seed), 'the retired key\'s seed is gone from the files');
    assert.ok(holds(await stored(before), active.seed));
    assert.equal(retired.erase_warning, null);

    const beforeProtect = await relationFiles(fixture.engine, url);
    const sealed = ok(await cli(['signing-key', 'protect', '--json'])).json();
    assert.deepEqual(sealed.changed, [active.keyId]);
    const after = await stored(beforeProtect);
    assert.ok(!holds(after, active.seed) && !holds(after, old.seed), 'no unsealed seed in the files after protect');
    assert.equal(sealed.erase_warning, null);
    if (fixture.engine === 'sqlite') assert.equal(readFileSync(`${url}-wal`).length, 0, 'the WAL was emptied (wal_checkpoint(TRUNCATE))');
  });
});
