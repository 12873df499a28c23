import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { listAudit } from '../../../src/lib/audit.js';
import { endorseKeys, listEndorsements } from '../../../src/lib/signing-keys/endorsements.js';
import { ensureSigningKey, listSigningKeys } from '../../../src/lib/signing-keys/keys.js';
import { prepareSigningKey } from '../../../src/lib/signing-keys/rotation.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { ok, runCli } from '../../support/cli.js';
import { forEachEngine } from '../../support/engines.js';

/** `<endorsed key id> <- <signer key id>` for every endorsement stored. */
async function pairs(db: Database): Promise<string[]> {
  const found: string[] = [];
  for (const [keyId, endorsements] of await listEndorsements(db)) for (const endorsement of endorsements) found.push(`${keyId} <- ${endorsement.signerKeyId}`);
  return found.sort();
}

/** The signing_key.endorsed entries, as the same pairs, with their actor and entity. */
async function audited(db: Database): Promise<Array<{ pair: string; actor: string; entity: string | null; entity_type: string }>> {
  return (await listAudit(db, { action: 'signing_key.endorsed' }))
    .map((entry) => ({
      pair: `${String(entry.details.key_id)} <- ${String(entry.details.signer_key_id)}`,
      actor: entry.actor,
      entity: entry.entity_id,
      entity_type: entry.entity_type,
    }))
    .sort((a, b) => a.pair.localeCompare(b.pair));
}

/** Issue 35, item 31: endorsements are audited like every other change of a signing key. */
forEachEngine('signing-key endorsements (signing-keys/endorsements.ts)', (fixture) => {
  it('audits each endorsement added as signing_key.endorsed, naming the endorsed key and its signer, and nothing when none is added', async () => {
    const db = await fixture.freshDatabase();
    const first = await ensureSigningKey(db, { actor: 'cli:ops' });
    const next = await prepareSigningKey(db, { actor: 'token:deploy' });
    const stored = await pairs(db);
    assert.deepEqual(stored, [`${first.key_id} <- ${next.key_id}`, `${next.key_id} <- ${first.key_id}`].sort());
    const ids = new Map((await listSigningKeys(db)).map((key) => [key.key_id, key.id]));
    assert.deepEqual(await audited(db), stored.map((pair) => ({ pair, actor: 'token:deploy', entity: ids.get(pair.split(' ')[0]!)!, entity_type: 'signing_key' })));
    // Run again (a daemon's start): nothing new to endorse, nothing audited.
    assert.equal(await endorseKeys(db, { actor: 'serve' }), 0);
    assert.equal((await audited(db)).length, 2);
  });

  it('skips a key sealed under a key-encryption key the process lacks, without failing, and the next process that can open it endorses with it', async () => {
    // Through the built CLI: each step is a process of its own, as on a real host.
    const work = mkdtempSync(path.join(tmpdir(), 'license-endorse-sealed-'));
    try {
      const url = await fixture.freshUrl();
      const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { env: { LICENSE_DATABASE_URL: url, ...extra }, cwd: work });
      const sealed = { LICENSE_SIGNING_KEY_ENCRYPTION_KEY: 'cd'.repeat(32) };
      ok(await cli(['init'], sealed));
      const [first] = ok(await cli(['signing-key', 'list', '--json'], sealed)).json();
      assert.equal(first.sealed, true);
      // Without the key-encryption key: the next key (stored unsealed) endorses the sealed
      // one, which cannot endorse it in this process; the preparation goes ahead all the same.
      const next = ok(await cli(['signing-key', 'rotate', '--prepare', '--json'])).json();
      assert.deepEqual([next.created, next.sealed], [true, false]);
      const endorsed = async () => {
        const db = await openDatabase(url);
        try {
          return { pairs: await pairs(db), audited: (await audited(db)).map((entry) => [entry.pair, entry.actor.split(':')[0]]) };
        } finally {
          await db.close();
        }
      };
      assert.deepEqual(await endorsed(), { pairs: [`${first.key_id} <- ${next.key_id}`], audited: [[`${first.key_id} <- ${next.key_id}`, 'cli']] });
      // Nor does a start without it fail over the sealed key, or add anything.
      ok(await cli(['init']));
      assert.equal((await endorsed()).pairs.length, 1);
      // The next process that holds the key-encryption key endorses with the sealed key.
      ok(await cli(['init'], sealed));
      const after = await endorsed();
      assert.deepEqual(after.pairs, [`${first.key_id} <- ${next.key_id}`, `${next.key_id} <- ${first.key_id}`].sort());
      assert.deepEqual(after.audited, after.pairs.map((pair) => [pair, 'cli']));
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
