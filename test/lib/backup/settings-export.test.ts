import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { mergeRestoredConfig, sanitizedConfigFile } from '../../../src/lib/backup/settings-export.js';

/** Config files that hold no setting at all, or none of the sections the backup touches. */
const NO_SECTIONS: Record<string, string> = {
  'issuer only': 'issuer: acme\n',
  empty: '',
  'comment only': '# nothing configured yet\n',
  'an empty backup section': '# tuned later\nbackup:\nissuer: acme # who signs\n',
  'an empty document marker': '---\n',
  'a null document': '~\n',
};

const KEY = 'cd'.repeat(32);
const TOKEN = 'a-very-long-admin-token-0123456789';

describe('the configuration file in a backup', () => {
  let dir: string;
  const write = (text: string) => {
    const file = path.join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(file, text);
    return file;
  };
  before(() => (dir = mkdtempSync(path.join(tmpdir(), 'license-settings-export-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const [shape, text] of Object.entries(NO_SECTIONS)) {
    it(`goes into a backup byte for byte when it has ${shape}`, async () => {
      assert.equal((await sanitizedConfigFile(write(text))).toString('utf8'), text);
    });

    it(`is restored byte for byte over a file without secrets when it has ${shape}`, async () => {
      assert.equal((await mergeRestoredConfig(Buffer.from(text), undefined)).toString('utf8'), text);
      assert.equal((await mergeRestoredConfig(Buffer.from(text), '')).toString('utf8'), text);
      assert.equal((await mergeRestoredConfig(Buffer.from(text), '# nothing\n')).toString('utf8'), text);
    });

    it(`is restored with this host's secrets added and its comments kept when it has ${shape}`, async () => {
      const current = `# this host\nadmin_token: ${TOKEN}\nbackup:\n  encryption_key: "${KEY}" # kept apart\n`;
      const merged = (await mergeRestoredConfig(Buffer.from(text), current)).toString('utf8');
      const before = parse(text) ?? {};
      const after = parse(merged);
      assert.equal(after.admin_token, TOKEN);
      assert.equal(after.backup.encryption_key, KEY);
      // Nothing else gained or lost: the restored settings, plus the two secrets.
      const { admin_token: _token, backup: { encryption_key: _key, ...backupRest }, ...rest } = after;
      const { backup: _backup, ...beforeRest } = before;
      assert.deepEqual(rest, beforeRest);
      assert.deepEqual(backupRest, {});
      for (const comment of text.match(/#.*$/gm) ?? []) assert.ok(merged.includes(comment), `${JSON.stringify(comment)} kept in:\n${merged}`);
    });
  }

  it('leaves the secrets out and keeps the comments and the other sections', async () => {
    const text = [
      '# production settings',
      `admin_token: ${TOKEN} # rotated monthly`,
      'database:',
      '  url: postgres://app:s3cret@db.internal/licenses # the primary',
      'backup:',
      '  # nightly',
      '  schedule: "0 2 * * *"',
      `  encryption_key: ${KEY}`,
      'grace:',
      '  hours: 48',
      '',
    ].join('\n');
    const sanitized = (await sanitizedConfigFile(write(text))).toString('utf8');
    assert.ok(!sanitized.includes(TOKEN) && !sanitized.includes(KEY) && !sanitized.includes('s3cret'), sanitized);
    for (const comment of ['# production settings', '# the primary', '# nightly']) assert.ok(sanitized.includes(comment), sanitized);
    assert.deepEqual(parse(sanitized), {
      database: { url: 'postgres://app:***@db.internal/licenses' },
      backup: { schedule: '0 2 * * *' },
      grace: { hours: 48 },
    });
    // Restored onto the same host, the file is whole again.
    assert.deepEqual(parse((await mergeRestoredConfig(Buffer.from(sanitized), text)).toString('utf8')), parse(text));
  });

  it('drops a redacted database URL when this host has none to put back, instead of writing one that cannot connect', async () => {
    const restored = 'database:\n  url: postgres://app:***@db.internal/licenses\nissuer: acme\n';
    const merged = parse((await mergeRestoredConfig(Buffer.from(restored), 'issuer: here\n')).toString('utf8'));
    assert.equal(merged.database?.url, undefined);
    assert.equal(merged.issuer, 'acme');
    const queryForm = 'database:\n  url: postgres://db.internal/licenses?user=app&password=***\n';
    const mergedQuery = parse((await mergeRestoredConfig(Buffer.from(queryForm), 'database:\n  url: postgres://db.internal/licenses?user=app&password=pw\n')).toString('utf8'));
    assert.equal(mergedQuery.database.url, 'postgres://db.internal/licenses?user=app&password=pw');
  });

  it('keeps this host\'s database.url, or none, whatever URL the backed-up host\'s file named', async () => {
    // A SQLite host's file restored on a PostgreSQL host: the data went into PostgreSQL, and
    // the next start must find it there, not in a new, empty SQLite file.
    const fromSqliteHost = '# the old host\ndatabase:\n  url: /var/lib/license-server/license-server.db\nissuer: acme\n';
    const onPostgresHost = parse((await mergeRestoredConfig(Buffer.from(fromSqliteHost), 'database:\n  url: postgres://app:pw@db.internal/licenses\n')).toString('utf8'));
    assert.deepEqual(onPostgresHost, { database: { url: 'postgres://app:pw@db.internal/licenses' }, issuer: 'acme' });
    // The file named no URL on the old host: this host's still holds.
    const withoutUrl = parse((await mergeRestoredConfig(Buffer.from('issuer: acme\n'), 'database:\n  url: postgres://db.internal/licenses\n')).toString('utf8'));
    assert.deepEqual(withoutUrl, { database: { url: 'postgres://db.internal/licenses' }, issuer: 'acme' });
    // This host's URL comes from the environment (its file names none): the restored file names none either.
    const fromEnvironment = parse((await mergeRestoredConfig(Buffer.from('database:\n  url: postgres://old-db/licenses\nissuer: acme\n'), 'issuer: here\n')).toString('utf8'));
    assert.equal(fromEnvironment.database?.url, undefined);
    assert.equal(fromEnvironment.issuer, 'acme');
  });
});
