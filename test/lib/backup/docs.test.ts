import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { EncryptStream, HEADER_LENGTH, MAGIC } from '../../../src/lib/backup/archive/encryption.js';
import { BACKUP_FORMAT, BACKUP_FORMAT_VERSION } from '../../../src/lib/backup/archive/manifest.js';
import { ENTRY_NAMES } from '../../../src/lib/backup/archive/archive.js';
import { TABLES } from '../../../src/lib/storage/migrations.js';
import { decodeKey } from '../../../src/lib/config/resolve.js';
import { ok, runCli } from '../../support/cli.js';

const doc = readFileSync(new URL('../../../docs/backup-format.md', import.meta.url), 'utf8');

describe('docs/backup-format.md', () => {
  it('states the constants the code uses', () => {
    assert.ok(doc.includes(`Magic \`${MAGIC.toString('ascii')}\``));
    assert.ok(doc.includes(`${HEADER_LENGTH}-byte header`));
    assert.ok(doc.includes(`"format": "${BACKUP_FORMAT}"`) && doc.includes(`"format_version": ${BACKUP_FORMAT_VERSION}`));
    for (const name of ENTRY_NAMES) assert.ok(doc.includes(`| \`${name}\` |`), name);
    for (const table of TABLES) assert.ok(doc.includes(`\`${table.name}\``), `the dump's table order names ${table.name}`);
    const source = readFileSync(new URL('../../../src/lib/backup/archive/encryption.ts', import.meta.url), 'utf8');
    for (const label of source.matchAll(/'(license-server\/v1\/[a-z-]+)'/g)) assert.ok(doc.includes(`"${label[1]}"`), label[1]);
  });

  it('quotes the PostgreSQL dump\'s four comment lines, of which a first-layout dump has the first three', () => {
    const quoted = /^1\. These four comment lines[\s\S]*?```\n([\s\S]*?)```/m.exec(doc)![1]!.split('\n').map((line) => line.trim()).filter(Boolean);
    assert.equal(quoted.length, 4);
    assert.ok(quoted.every((line) => line.startsWith('-- ')));
    const layout1 = readFileSync(new URL('../../vectors/postgres-dump-layout-1.sql', import.meta.url), 'utf8').split('\n');
    assert.deepEqual(layout1.slice(0, 3), quoted.slice(0, 3).map((line) => line.replace('schema version N', 'schema version 5')));
    assert.doesNotMatch(layout1[3]!, /^--/, 'the first layout has no fourth comment line');
    assert.ok(doc.replace(/\s+/g, ' ').includes(`have the first three of those comment lines (not the fourth, \`${quoted[3]}\``));
  });

  it('has a decryption script that recovers an encrypted backup with node:crypto alone', async () => {
    const script = /### Decrypting by hand[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)?.[1];
    assert.ok(script, 'the script is in the document');
    const dir = mkdtempSync(path.join(tmpdir(), 'license-doc-'));
    try {
      writeFileSync(path.join(dir, 'decrypt.mjs'), script);
      const run = (keyText: string, out = path.join(dir, 'plain.tar.gz')) =>
        spawnSync(process.execPath, [path.join(dir, 'decrypt.mjs'), path.join(dir, 'backup.enc'), keyText, out], { encoding: 'buffer' });
      const key = randomBytes(32);
      for (const length of [0, 1000, 1024, 5000]) {
        const plaintext = randomBytes(length);
        writeFileSync(path.join(dir, 'backup.enc'), await buffer(Readable.from([plaintext]).pipe(new EncryptStream(key, 1024))));
        const result = run(key.toString('hex'));
        assert.equal(result.status, 0, result.stderr.toString());
        assert.deepEqual(readFileSync(path.join(dir, 'plain.tar.gz')), plaintext, `length ${length}`);
        assert.ok(!existsSync(path.join(dir, 'plain.tar.gz.partial')));
      }
      const wrong = run(randomBytes(32).toString('hex'), path.join(dir, 'wrong.tar.gz'));
      assert.notEqual(wrong.status, 0);
      assert.match(wrong.stderr.toString(), /backup was encrypted with a different key/);
      assert.ok(!existsSync(path.join(dir, 'wrong.tar.gz')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('its decryption script takes the key in every form backup.encryption_key accepts, and no other', async () => {
    const script = /### Decrypting by hand[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)![1]!;
    const dir = mkdtempSync(path.join(tmpdir(), 'license-doc-'));
    try {
      writeFileSync(path.join(dir, 'decrypt.mjs'), script);
      // A key whose standard Base64 has both "+" and "/", so its URL-safe form differs.
      let key = randomBytes(32);
      while (!/\+/.test(key.toString('base64')) || !/\//.test(key.toString('base64'))) key = randomBytes(32);
      const plaintext = randomBytes(3000);
      writeFileSync(path.join(dir, 'backup.enc'), await buffer(Readable.from([plaintext]).pipe(new EncryptStream(key, 1024))));
      const forms = {
        'hex': key.toString('hex'),
        'upper-case hex': key.toString('hex').toUpperCase(),
        'standard Base64 with its pad': key.toString('base64'),
        'standard Base64 without its pad': key.toString('base64').replace(/=$/, ''),
        'URL-safe Base64 with a pad': key.toString('base64url') + '=',
        'URL-safe Base64': key.toString('base64url'),
        'hex with white space around': ` ${key.toString('hex')}\n`,
      };
      for (const [form, text] of Object.entries(forms)) {
        assert.deepEqual(decodeKey(text.trim()), key, `the tool takes ${form}`);
        const out = path.join(dir, 'plain.tar.gz');
        rmSync(out, { force: true });
        const result = spawnSync(process.execPath, [path.join(dir, 'decrypt.mjs'), path.join(dir, 'backup.enc'), text, out]);
        assert.equal(result.status, 0, `${form}: ${result.stderr}`);
        assert.deepEqual(readFileSync(out), plaintext, form);
      }
      for (const text of [key.toString('hex').slice(1), key.toString('base64') + '=', key.toString('base64').slice(1), randomBytes(31).toString('base64'), randomBytes(33).toString('hex')]) {
        assert.equal(decodeKey(text), undefined, `the tool refuses ${text.length} characters`);
        const result = spawnSync(process.execPath, [path.join(dir, 'decrypt.mjs'), path.join(dir, 'backup.enc'), text, path.join(dir, 'refused.tar.gz')]);
        assert.notEqual(result.status, 0, `the script refuses what the tool refuses (${text.length} characters)`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('its decryption script leaves no output at all when a later chunk fails, or the last one is empty after a full one', async () => {
    const script = /### Decrypting by hand[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)![1]!;
    const dir = mkdtempSync(path.join(tmpdir(), 'license-doc-'));
    try {
      writeFileSync(path.join(dir, 'decrypt.mjs'), script);
      const key = randomBytes(32);
      const encrypted = await buffer(Readable.from([randomBytes(5000)]).pipe(new EncryptStream(key, 1024)));
      const damaged = Buffer.from(encrypted);
      damaged[HEADER_LENGTH + 3 * (1024 + 16) + 7]! ^= 1;
      const out = path.join(dir, 'plain.tar.gz');
      const cases: Array<[string, Buffer]> = [
        ['a damaged fourth chunk', damaged],
        ['the last chunk cut off', encrypted.subarray(0, HEADER_LENGTH + 4 * (1024 + 16))],
        ['a byte appended', Buffer.concat([encrypted, Buffer.alloc(1)])],
      ];
      // A whole chunk then an empty final one: sealed by the reader's rules, never by the writer.
      const full = await buffer(Readable.from([randomBytes(1024)]).pipe(new EncryptStream(key, 1024)));
      cases.push(['an empty last chunk after a full one', withEmptyFinalChunk(full, key)]);
      for (const [what, bytes] of cases) {
        writeFileSync(path.join(dir, 'backup.enc'), bytes);
        const result = spawnSync(process.execPath, [path.join(dir, 'decrypt.mjs'), path.join(dir, 'backup.enc'), key.toString('hex'), out], { encoding: 'utf8' });
        assert.notEqual(result.status, 0, what);
        assert.deepEqual(readdirSync(dir).sort(), ['backup.enc', 'decrypt.mjs'], `${what}: neither ${out} nor its .partial is left`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lists the fields of an index as backup create writes them, no more and no fewer (issue 35, item 21)', async function () {
    this.timeout(60_000);
    // "Fields: `a`, `b` (values), ... and `z` (...).": the names in backticks up to the end of
    // that sentence, with what the parentheses say about them left out.
    let fields = /\*\*The index\*\*[\s\S]*?Fields: ([\s\S]*?)\n\n/.exec(doc)?.[1];
    assert.ok(fields, 'the paragraph "The index" has its list of fields');
    while (/\([^()]*\)/.test(fields)) fields = fields.replace(/\([^()]*\)/g, '');
    fields = fields.slice(0, fields.search(/\.(\s|$)/));
    const documented = [...fields.matchAll(/`([a-z_0-9]+)`/g)].map((match) => match[1]!).sort();
    const work = mkdtempSync(path.join(tmpdir(), 'license-index-doc-'));
    try {
      const env = { LICENSE_DATA_DIR: path.join(work, 'data') };
      ok(await runCli(['init'], { env, cwd: work }));
      const made = ok(await runCli(['backup', 'create', '--json'], { env, cwd: work })).json();
      const index = JSON.parse(readFileSync(path.join(work, 'data', 'backups', `${made.backup_id}.backup.json`), 'utf8'));
      assert.deepEqual(documented, Object.keys(index).sort());
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

/** Re-seals a one-chunk file's chunk as non-final and appends an empty final chunk, as the format's rules would. */
function withEmptyFinalChunk(file: Buffer, key: Buffer): Buffer {
  const header = file.subarray(0, HEADER_LENGTH);
  const salt = header.subarray(8, 24);
  const fileKey = Buffer.from(hkdfSync('sha256', key, salt, 'license-server/v1/backup-file-key', 32));
  const seal = (plaintext: Buffer, index: number, final: boolean) => {
    const nonce = Buffer.alloc(12);
    nonce.writeBigUInt64BE(BigInt(index));
    nonce.writeUInt32BE(final ? 1 : 0, 8);
    const cipher = createCipheriv('aes-256-gcm', fileKey, nonce).setAAD(header);
    return Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  };
  const decipherNonce = Buffer.alloc(12);
  decipherNonce.writeUInt32BE(1, 8);
  const decipher = createDecipheriv('aes-256-gcm', fileKey, decipherNonce).setAAD(header).setAuthTag(file.subarray(-16));
  const plaintext = Buffer.concat([decipher.update(file.subarray(HEADER_LENGTH, -16)), decipher.final()]);
  return Buffer.concat([header, seal(plaintext, 0, false), seal(Buffer.alloc(0), 1, true)]);
}
