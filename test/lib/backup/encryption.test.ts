import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createCipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import { DecryptStream, EncryptStream, HEADER_LENGTH, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, TAG_LENGTH } from '../../../src/lib/backup/archive/encryption.js';
import { LicenseServerError } from '../../../src/lib/errors.js';

const key = randomBytes(32);
const CHUNK = 1024;

async function encrypt(plaintext: Buffer, pieces = 7): Promise<Buffer> {
  const parts = [];
  for (let i = 0; i < plaintext.length; i += Math.max(1, Math.ceil(plaintext.length / pieces))) {
    parts.push(plaintext.subarray(i, i + Math.ceil(plaintext.length / pieces)));
  }
  return buffer(Readable.from(parts).pipe(new EncryptStream(key, CHUNK)));
}

async function decrypt(ciphertext: Buffer, withKey = key, pieceSize = 333): Promise<Buffer> {
  const parts = [];
  for (let i = 0; i < ciphertext.length; i += pieceSize) parts.push(ciphertext.subarray(i, i + pieceSize));
  const chunks: Buffer[] = [];
  await pipeline(Readable.from(parts), new DecryptStream(withKey), async function* (source) {
    for await (const chunk of source) chunks.push(chunk as Buffer);
  });
  return Buffer.concat(chunks);
}

async function refusedWith(ciphertext: Buffer, code: string, withKey = key): Promise<void> {
  await assert.rejects(decrypt(ciphertext, withKey), (error: unknown) => {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, code, error.message);
    return true;
  });
}

/**
 * Seals `pieces` as docs/backup-format.md says, with node:crypto alone, so that files the
 * writer never makes (another chunk size, an empty last chunk) can be put to the reader.
 */
function sealByHand(pieces: readonly Buffer[], chunkSize: number): Buffer {
  const salt = randomBytes(16);
  const header = Buffer.alloc(HEADER_LENGTH);
  header.write('LSBK', 0, 'ascii');
  header[4] = 1;
  salt.copy(header, 8);
  createHmac('sha256', key).update('license-server/v1/backup-key-check').update(salt).digest().copy(header, 24, 0, 16);
  header.writeUInt32BE(chunkSize, 40);
  const fileKey = Buffer.from(hkdfSync('sha256', key, salt, 'license-server/v1/backup-file-key', 32));
  const records = pieces.map((piece, i) => {
    const nonce = Buffer.alloc(12);
    nonce.writeBigUInt64BE(BigInt(i));
    nonce.writeUInt32BE(i === pieces.length - 1 ? 1 : 0, 8);
    const cipher = createCipheriv('aes-256-gcm', fileKey, nonce).setAAD(header);
    return Buffer.concat([cipher.update(piece), cipher.final(), cipher.getAuthTag()]);
  });
  return Buffer.concat([header, ...records]);
}

describe('backup encryption (chunked AES-256-GCM)', () => {
  it(`reads chunk sizes from ${MIN_CHUNK_SIZE} to ${MAX_CHUNK_SIZE} bytes and refuses any other`, async () => {
    assert.equal(MIN_CHUNK_SIZE, 1024);
    assert.equal(MAX_CHUNK_SIZE, 64 * 1024 * 1024);
    const plaintext = randomBytes(3000);
    for (const size of [MIN_CHUNK_SIZE, 4096, MAX_CHUNK_SIZE]) {
      const pieces = [];
      for (let i = 0; i < plaintext.length; i += size) pieces.push(plaintext.subarray(i, i + size));
      assert.deepEqual(await decrypt(sealByHand(pieces, size)), plaintext, `chunk size ${size}`);
    }
    for (const size of [0, 16, MIN_CHUNK_SIZE - 1, MAX_CHUNK_SIZE + 1, 0xffffffff]) {
      await assert.rejects(decrypt(sealByHand([plaintext], size)), (error: unknown) => {
        assert.ok(error instanceof LicenseServerError && error.code === 'BACKUP_CORRUPT', String(error));
        assert.match(error.message, /chunk size/);
        return true;
      }, `chunk size ${size}`);
    }
    for (const size of [MIN_CHUNK_SIZE - 1, MAX_CHUNK_SIZE + 1]) assert.throws(() => new EncryptStream(key, size), /chunk size/, `the writer refuses ${size} too`);
  });

  it('refuses an empty last chunk after a full one, and accepts it only as the one chunk of an empty plaintext', async () => {
    const full = randomBytes(CHUNK);
    await refusedWith(sealByHand([full, Buffer.alloc(0)], CHUNK), 'BACKUP_CORRUPT');
    await refusedWith(sealByHand([full, full, Buffer.alloc(0)], CHUNK), 'BACKUP_CORRUPT');
    assert.deepEqual(await decrypt(sealByHand([full], CHUNK)), full, 'a full last chunk is how the writer ends an exact multiple');
    assert.deepEqual(await decrypt(sealByHand([Buffer.alloc(0)], CHUNK)), Buffer.alloc(0));
    assert.deepEqual(await encrypt(Buffer.alloc(0)).then((c) => c.length), HEADER_LENGTH + TAG_LENGTH);
  });

  it('round-trips any length, including empty and exact multiples of the chunk size', async () => {
    for (const length of [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 17]) {
      const plaintext = randomBytes(length);
      const ciphertext = await encrypt(plaintext);
      const chunks = Math.max(1, Math.ceil(length / CHUNK));
      assert.equal(ciphertext.length, HEADER_LENGTH + length + chunks * TAG_LENGTH, `length ${length}`);
      assert.deepEqual(await decrypt(ciphertext), plaintext, `length ${length}`);
    }
  });

  it('says "backup was encrypted with a different key" at once for a wrong key', async () => {
    const ciphertext = await encrypt(randomBytes(5000));
    await assert.rejects(decrypt(ciphertext, randomBytes(32)), /^LicenseServerError: backup was encrypted with a different key$/);
    await refusedWith(ciphertext, 'BACKUP_WRONG_KEY', randomBytes(32));
  });

  it('detects truncation at every chunk boundary and elsewhere', async () => {
    const ciphertext = await encrypt(randomBytes(3 * CHUNK + 100));
    const record = CHUNK + TAG_LENGTH;
    const cuts = [0, 10, HEADER_LENGTH, HEADER_LENGTH + 5, HEADER_LENGTH + record, HEADER_LENGTH + 2 * record, HEADER_LENGTH + 3 * record, ciphertext.length - 1];
    for (const cut of cuts) {
      await assert.rejects(decrypt(ciphertext.subarray(0, cut)), (error: unknown) => error instanceof LicenseServerError && error.code === 'BACKUP_CORRUPT', `cut at ${cut}`);
    }
  });

  it('detects appended bytes and appended chunks', async () => {
    const ciphertext = await encrypt(randomBytes(2 * CHUNK));
    await refusedWith(Buffer.concat([ciphertext, Buffer.from([0])]), 'BACKUP_CORRUPT');
    const other = await encrypt(randomBytes(CHUNK));
    await refusedWith(Buffer.concat([ciphertext, other.subarray(HEADER_LENGTH)]), 'BACKUP_CORRUPT');
  });

  it('detects swapped chunks', async () => {
    const ciphertext = await encrypt(randomBytes(3 * CHUNK + 1));
    const record = CHUNK + TAG_LENGTH;
    const header = ciphertext.subarray(0, HEADER_LENGTH);
    const records = [0, 1, 2, 3].map((i) => ciphertext.subarray(HEADER_LENGTH + i * record, HEADER_LENGTH + (i + 1) * record));
    await refusedWith(Buffer.concat([header, records[1]!, records[0]!, records[2]!, records[3]!]), 'BACKUP_CORRUPT');
  });

  it('detects a single flipped bit anywhere', async () => {
    const ciphertext = await encrypt(randomBytes(2 * CHUNK + 300));
    for (let offset = 0; offset < ciphertext.length; offset += 37) {
      const damaged = Buffer.from(ciphertext);
      damaged[offset] = damaged[offset]! ^ (1 << (offset % 8));
      await assert.rejects(decrypt(damaged), (error: unknown) => error instanceof LicenseServerError && /^BACKUP_/.test(error.code), `offset ${offset}`);
    }
  });

  it('gives for a changed bit in each byte of the header the code of docs/backup-format.md\'s table "Which code a changed bit gives"', async () => {
    const doc = readFileSync(new URL('../../../docs/backup-format.md', import.meta.url), 'utf8');
    const table = /^\*\*Which code a changed bit gives\.\*\*[\s\S]*?\n\| Bytes \| Field \| Code \|\n\|[-|]+\|\n((?:\|.*\n)+)/m.exec(doc)![1]!;
    const rows = [...table.matchAll(/^\| (\d+)(?:-(\d*))? \| [^|]+ \| ([^|]+) \|$/gm)].map(([, from, to, code]) => ({
      from: Number(from), to: to === undefined ? Number(from) : to === '' ? Infinity : Number(to), code: code!.trim(),
    }));
    assert.equal(rows.length, 7);
    const expected = (offset: number, changed: number): string => {
      const row = rows.find((candidate) => candidate.from <= offset && offset <= candidate.to)!;
      if (row.code.startsWith('`BACKUP_CORRUPT` when it makes `0`')) return changed === 0 ? 'BACKUP_CORRUPT' : 'BACKUP_UNSUPPORTED';
      return /^`([A-Z_]+)`$/.exec(row.code)![1]!;
    };
    const ciphertext = await encrypt(randomBytes(2 * CHUNK + 300));
    const offsets = [...Array(HEADER_LENGTH).keys(), HEADER_LENGTH, HEADER_LENGTH + 500, ciphertext.length - 1];
    const seen = new Set<string>();
    for (const offset of offsets) {
      for (let bit = 0; bit < 8; bit += 1) {
        const damaged = Buffer.from(ciphertext);
        damaged[offset] = damaged[offset]! ^ (1 << bit);
        const code = expected(offset, damaged[offset]!);
        seen.add(code);
        await refusedWith(damaged, code).catch((error: Error) => assert.fail(`byte ${offset} bit ${bit}: ${error.message}`));
      }
    }
    assert.deepEqual([...seen].sort(), ['BACKUP_CORRUPT', 'BACKUP_INVALID', 'BACKUP_UNSUPPORTED', 'BACKUP_WRONG_KEY']);
    // The hint of BACKUP_WRONG_KEY names both causes the key check cannot tell apart.
    assert.match(new LicenseServerError('BACKUP_WRONG_KEY', 'x').hint!, /key the backup was made with[\s\S]*salt or key check value[\s\S]*is damaged/);
  });

  it('hands out no plaintext of a chunk whose tag fails', async () => {
    const ciphertext = await encrypt(randomBytes(3 * CHUNK));
    const damaged = Buffer.from(ciphertext);
    damaged[HEADER_LENGTH + CHUNK + TAG_LENGTH + 5] = damaged[HEADER_LENGTH + CHUNK + TAG_LENGTH + 5]! ^ 1;
    const seen: Buffer[] = [];
    const split = HEADER_LENGTH + CHUNK + TAG_LENGTH + 1;
    async function* slowly() {
      yield damaged.subarray(0, split);
      await new Promise((resolve) => setTimeout(resolve, 20));
      yield damaged.subarray(split);
    }
    await assert.rejects(
      pipeline(Readable.from(slowly()), new DecryptStream(key), async function* (source) {
        for await (const chunk of source) seen.push(chunk as Buffer);
      }),
    );
    assert.equal(Buffer.concat(seen).length, CHUNK, 'only the first, authentic chunk came out');
  });
});
