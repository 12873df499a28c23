import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { EncryptStream, HEADER_LENGTH, MAGIC } from '../../../src/lib/backup/encryption.js';
import { BACKUP_FORMAT, BACKUP_FORMAT_VERSION } from '../../../src/lib/backup/manifest.js';
import { ENTRY_NAMES } from '../../../src/lib/backup/archive.js';
import { TABLES } from '../../../src/lib/storage/migrations.js';

const doc = readFileSync(new URL('../../../docs/backup-format.md', import.meta.url), 'utf8');

describe('docs/backup-format.md', () => {
  it('states the constants the code uses', () => {
    assert.ok(doc.includes(`Magic \`${MAGIC.toString('ascii')}\``));
    assert.ok(doc.includes(`${HEADER_LENGTH}-byte header`));
    assert.ok(doc.includes(`"format": "${BACKUP_FORMAT}"`) && doc.includes(`"format_version": ${BACKUP_FORMAT_VERSION}`));
    for (const name of ENTRY_NAMES) assert.ok(doc.includes(`| \`${name}\` |`), name);
    for (const table of TABLES) assert.ok(doc.includes(`\`${table.name}\``), `the dump's table order names ${table.name}`);
    const source = readFileSync(new URL('../../../src/lib/backup/encryption.ts', import.meta.url), 'utf8');
    for (const label of source.matchAll(/'(license-server\/v1\/[a-z-]+)'/g)) assert.ok(doc.includes(`"${label[1]}"`), label[1]);
  });

  it('has a decryption script that recovers an encrypted backup with node:crypto alone', async () => {
    const script = /### Decrypting by hand[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)?.[1];
    assert.ok(script, 'the script is in the document');
    const dir = mkdtempSync(path.join(tmpdir(), 'license-doc-'));
    try {
      writeFileSync(path.join(dir, 'decrypt.mjs'), script);
      const key = randomBytes(32);
      for (const length of [0, 1000, 1024, 5000]) {
        const plaintext = randomBytes(length);
        writeFileSync(path.join(dir, 'backup.enc'), await buffer(Readable.from([plaintext]).pipe(new EncryptStream(key, 1024))));
        const output = execFileSync(process.execPath, [path.join(dir, 'decrypt.mjs'), path.join(dir, 'backup.enc'), key.toString('hex')]);
        assert.deepEqual(output, plaintext, `length ${length}`);
      }
      const wrong = spawnSync(process.execPath, [path.join(dir, 'decrypt.mjs'), path.join(dir, 'backup.enc'), randomBytes(32).toString('hex')], { encoding: 'utf8' });
      assert.notEqual(wrong.status, 0);
      assert.match(wrong.stderr, /backup was encrypted with a different key/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
