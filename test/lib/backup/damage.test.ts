import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { createBackup } from '../../../src/lib/backup/create.js';
import { listBackups } from '../../../src/lib/backup/repository.js';
import { restoreBackup } from '../../../src/lib/backup/restore.js';
import { validateBackup } from '../../../src/lib/backup/validate.js';
import { resolveConfig, type ResolvedConfig } from '../../../src/lib/config/resolve.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { openDatabase } from '../../../src/lib/storage/open.js';

const KEY = 'cd'.repeat(32);

/**
 * Every damaged archive, encrypted or not, is refused as BACKUP_CORRUPT (or BACKUP_INVALID
 * where it is not a backup at all), never INTERNAL and never valid; and a refused restore
 * changes nothing. The database is made big enough (about 3 MB of random bytes) for the
 * archive to hold several gzip members and several encrypted chunks.
 */
describe('damaged backups: truncated anywhere, or appended to', function () {
  let work: string;
  let config: ResolvedConfig;
  let directory: string;
  const files: Record<'plain' | 'encrypted', Buffer> = { plain: Buffer.alloc(0), encrypted: Buffer.alloc(0) };
  let rowsBefore: string;

  const rows = async () => {
    const db = await openDatabase(config.settings.database.url);
    try {
      return JSON.stringify(await db.query('SELECT id, name FROM customers ORDER BY id'));
    } finally {
      await db.close();
    }
  };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-damage-'));
    directory = path.join(work, 'backups');
    const env = { LICENSE_DATABASE_URL: path.join(work, 'data', 'license-server.db'), LICENSE_BACKUP_PATH: directory };
    config = await resolveConfig({ env, cwd: work });
    const db = await openDatabase(config.settings.database.url);
    try {
      await db.transaction(async (tx) => {
        // The bulk is in audit details, which no index reads: 2,800 names of 1,300 random
        // characters made the customers' trigram index ten times the data (and the test 5x slower).
        for (let i = 0; i < 2800; i++) {
          await tx.execute('INSERT INTO customers (id, name, active, created_at, updated_at) VALUES (?, ?, 1, ?, ?)', [
            `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
            `Customer ${i}`,
            '2026-01-01T00:00:00.000Z',
            '2026-01-01T00:00:00.000Z',
          ]);
          await tx.execute('INSERT INTO audit_log (occurred_at, actor, action, entity_type, entity_id, details) VALUES (?, ?, ?, ?, ?, ?)', [
            '2026-01-01T00:00:00.000Z',
            'test',
            'customer.create',
            'customer',
            `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
            JSON.stringify({ filler: randomBytes(1000).toString('base64') }),
          ]);
        }
      });
      const plain = await createBackup({ db, config, trigger: 'manual', toolVersion: 'test', context: { actor: 'test' } });
      files.plain = readFileSync(path.join(directory, plain.file));
      const keyed = await resolveConfig({ env: { ...env, LICENSE_BACKUP_ENCRYPTION_KEY: KEY }, cwd: work });
      const encrypted = await createBackup({ db, config: keyed, trigger: 'manual', toolVersion: 'test', context: { actor: 'test' } });
      files.encrypted = readFileSync(path.join(directory, encrypted.file));
    } finally {
      await db.close();
    }
    assert.ok(files.plain.length > 2.5 * 1024 * 1024, 'big enough for two gzip members and three encrypted chunks');
    rowsBefore = await rows();
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  function variants(bytes: Buffer): Array<[string, Buffer]> {
    const out: Array<[string, Buffer]> = [];
    for (let length = 0; length <= 64; length++) out.push([`truncated to ${length} bytes`, bytes.subarray(0, length)]);
    for (let i = 1; i <= 24; i++) {
      const length = Math.floor((bytes.length * i) / 25);
      out.push([`truncated to ${length} bytes`, bytes.subarray(0, length)]);
    }
    for (const cut of [1, 2, 7, 8, 9, 16, 17, 511, 512, 1024, 1025]) out.push([`missing its last ${cut} bytes`, bytes.subarray(0, bytes.length - cut)]);
    const appended: Array<[string, Buffer]> = [
      ['1 zero byte', Buffer.alloc(1)],
      ['1 random byte', randomBytes(1)],
      ['the byte 0x1f', Buffer.from([0x1f])],
      ['512 zero bytes', Buffer.alloc(512)],
      ['a gzip member of random bytes', gzipSync(randomBytes(300))],
      ['a gzip member of 512 zero bytes', gzipSync(Buffer.alloc(512))],
      ['an empty gzip member', gzipSync(Buffer.alloc(0))],
      ['the whole archive again', bytes],
    ];
    for (const [what, tail] of appended) out.push([`with ${what} appended`, Buffer.concat([bytes, tail])]);
    return out;
  }

  for (const kind of ['plain', 'encrypted'] as const) {
    it(`refuses every damaged ${kind} backup with BACKUP_CORRUPT or BACKUP_INVALID in validate and restore, changing nothing`, async () => {
      const target = path.join(work, kind === 'plain' ? 'damaged.backup.tar.gz' : 'damaged.backup.tar.gz.enc');
      const key = kind === 'encrypted' ? Buffer.from(KEY, 'hex') : undefined;
      const restoreConfig = kind === 'encrypted' ? await resolveConfig({ env: { LICENSE_DATABASE_URL: config.settings.database.url, LICENSE_BACKUP_PATH: directory, LICENSE_BACKUP_ENCRYPTION_KEY: KEY }, cwd: work }) : config;
      let listed = (await listBackups(directory)).length;
      const wrong: string[] = [];
      for (const [what, bytes] of variants(files[kind])) {
        writeFileSync(target, bytes);
        for (const [operation, run] of [
          ['validate', () => validateBackup({ directory, reference: target, key })],
          ['restore', () => restoreBackup({ config: restoreConfig, reference: target, toolVersion: 'test', context: { actor: 'test' } })],
        ] as const) {
          try {
            await run();
            wrong.push(`${operation} ${what}: accepted`);
          } catch (error) {
            const code = error instanceof LicenseServerError ? error.code : `not a LicenseServerError: ${String(error)}`;
            if (code !== 'BACKUP_CORRUPT' && code !== 'BACKUP_INVALID') wrong.push(`${operation} ${what}: ${code} ${(error as Error).message}`);
          }
        }
        const now = (await listBackups(directory)).length;
        if (now !== listed) wrong.push(`${what}: a restore went as far as taking a pre-restore backup`);
        listed = now;
      }
      assert.deepEqual(wrong, []);
      assert.equal(await rows(), rowsBefore, 'the database is unchanged');
      assert.deepEqual(readdirSync(path.dirname(config.settings.database.url)).filter((name) => name.startsWith('.restore-')), [], 'no staging left');
    });
  }

  it('refuses a listed backup whose archive was appended to or truncated as BACKUP_CORRUPT, by id', async () => {
    const [newest] = await listBackups(directory);
    const file = path.join(directory, newest!.file);
    const original = readFileSync(file);
    const key = newest!.encrypted ? Buffer.from(KEY, 'hex') : undefined;
    try {
      for (const bytes of [Buffer.concat([original, Buffer.alloc(1)]), original.subarray(0, original.length - 1)]) {
        writeFileSync(file, bytes);
        await assert.rejects(validateBackup({ directory, reference: newest!.backup_id, key }), (error: unknown) => {
          assert.ok(error instanceof LicenseServerError);
          assert.equal(error.code, 'BACKUP_CORRUPT', error.message);
          assert.match(error.message, /its index says/);
          return true;
        });
      }
      // Same length, one byte changed where the reader would not look: the index's SHA-256 still tells.
      const changed = Buffer.from(original);
      changed[changed.length - 1] = changed[changed.length - 1]! ^ 1;
      writeFileSync(file, changed);
      await assert.rejects(validateBackup({ directory, reference: newest!.backup_id, key }), (error: unknown) => error instanceof LicenseServerError && error.code === 'BACKUP_CORRUPT');
    } finally {
      writeFileSync(file, original);
    }
    await validateBackup({ directory, reference: newest!.backup_id, key });
  });
});
