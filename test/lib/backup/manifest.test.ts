import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseManifest } from '../../../src/lib/backup/archive/manifest.js';
import { sqliteSchemaVersion } from '../../../src/lib/backup/engines/sqlite-snapshot.js';
import { SCHEMA_VERSION } from '../../../src/lib/storage/migrations.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import { loadSqliteDriver } from '../../../src/lib/storage/sqlite-driver.js';
import { LicenseServerError } from '../../../src/lib/errors.js';

const doc = readFileSync(new URL('../../../docs/backup-format.md', import.meta.url), 'utf8');
const section = /^## manifest\.json\n([\s\S]*?)^## /m.exec(doc)![1]!;
/** The example of docs/backup-format.md, with real digests in place of the placeholders. */
const example = JSON.parse(/```json\n([\s\S]*?)```/.exec(section)![1]!.replace(/"<64 hex digits>"|"\.\.\."/g, `"${'0'.repeat(64)}"`)) as Record<string, unknown>;
/** The members of the table "Required form", in its order. */
const members = [...section.matchAll(/^\| `([a-z_]+)` \| /gm)].map((m) => m[1]!);

function outcome(manifest: unknown): string {
  try {
    parseManifest(typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
    return 'accepted';
  } catch (error) {
    assert.ok(error instanceof LicenseServerError, String(error));
    return `${error.code}: ${error.message}`;
  }
}

describe('the backup manifest (docs/backup-format.md, "manifest.json")', () => {
  it('has a table of required members that are the members of the example, in the example\'s order', () => {
    assert.deepEqual(members, Object.keys(example));
    assert.equal(outcome(example), 'accepted');
  });

  it('refuses a manifest without any one member of the table, checking them in the table\'s order', () => {
    for (const [i, name] of members.entries()) {
      // Without this member and every later one: the reader names this one, so it checks in this order.
      const partial = Object.fromEntries(Object.entries(example).filter(([key]) => !members.slice(i).includes(key)));
      assert.match(outcome(partial), new RegExp(`^BACKUP_INVALID: the backup manifest is invalid: .*"${name}"`), name);
    }
  });

  it('takes format_version 1, refuses a larger integer as BACKUP_UNSUPPORTED and anything else as BACKUP_INVALID', () => {
    assert.match(outcome({ ...example, format_version: 2 }), /^BACKUP_UNSUPPORTED: backup format version 2 is not supported/);
    for (const version of [0, -1, 1.5, '1', null]) {
      assert.equal(outcome({ ...example, format_version: version }), 'BACKUP_INVALID: the backup manifest is invalid: "format_version" is not a positive integer', JSON.stringify(version));
    }
  });

  it('requires created_at in RFC 3339 UTC with an optional fraction, and tool_version a string', () => {
    for (const created of ['2026-11-22T10:15:00Z', '2026-11-22T10:15:00.123Z', '2026-11-22T10:15:00.123456789Z']) {
      assert.equal(outcome({ ...example, created_at: created }), 'accepted', created);
    }
    for (const created of ['2026-11-22 10:15:00', '2026-11-22T10:15:00+01:00', 'Sun, 22 Nov 2026 10:15:00 GMT', '2026-02-30T10:15:00Z', '2026-11-22T24:00:00Z', 1795341600]) {
      assert.equal(outcome({ ...example, created_at: created }), 'BACKUP_INVALID: the backup manifest is invalid: "created_at" is not an RFC 3339 UTC timestamp', String(created));
    }
    assert.equal(outcome({ ...example, tool_version: 1 }), 'BACKUP_INVALID: the backup manifest is invalid: "tool_version" is not a string');
  });

  it('ignores members the table does not name and the member order, and refuses what is not an object', () => {
    const entries = (example.entries as Array<Record<string, unknown>>).map((entry) => ({ note: 'extra', ...entry })).reverse();
    const reordered = Object.fromEntries(Object.entries({ ...example, entries, comment: 'made by hand' }).reverse());
    assert.equal(outcome(reordered), 'accepted');
    assert.equal(outcome(`  ${JSON.stringify(reordered)}  `), 'accepted');
    assert.equal(outcome([example]), 'BACKUP_INVALID: the backup manifest is invalid: it is not an object');
  });

  it('takes the optional signing_keys in the form the section gives, and refuses another form', () => {
    const keys = [{ key_id: '0123456789abcdef', state: 'active', created_at: '2026-11-22T10:15:00.000Z' }];
    assert.equal(outcome({ ...example, signing_keys: keys }), 'accepted');
    assert.equal(outcome({ ...example, signing_keys: [] }), 'accepted');
    for (const bad of [{}, [{ ...keys[0], key_id: 'ABCDEF0123456789' }], [{ ...keys[0], state: 'revoked' }], [{ ...keys[0], created_at: 1 }], [null]]) {
      assert.equal(outcome({ ...example, signing_keys: bad }), 'BACKUP_INVALID: the backup manifest is invalid: "signing_keys" is malformed', JSON.stringify(bad));
    }
  });

  it('requires the database entry of its engine', () => {
    const others = (example.entries as Array<{ name: string }>).filter((entry) => entry.name !== 'database/sqlite.db');
    assert.equal(outcome({ ...example, entries: others }), 'BACKUP_INVALID: the backup manifest is invalid: it lists no database/sqlite.db');
  });

  it('names where a SQLite backup\'s database records its schema version, which is what backup validate reads', async () => {
    assert.match(section.replace(/\s+/g, ' '), /in `database\/sqlite\.db` it is the largest `version` in the table `schema_migrations`/);
    const dir = mkdtempSync(path.join(tmpdir(), 'license-manifest-'));
    try {
      const file = path.join(dir, 'data', 'license-server.db');
      await (await openDatabase(file)).close();
      assert.equal(await sqliteSchemaVersion(file), SCHEMA_VERSION);
      const Database = loadSqliteDriver();
      const db = new Database(file);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(SCHEMA_VERSION + 40, 'later', new Date().toISOString());
      db.close();
      assert.equal(await sqliteSchemaVersion(file), SCHEMA_VERSION + 40);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
