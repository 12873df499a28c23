import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import { DecryptStream, EncryptStream, HEADER_LENGTH, TAG_LENGTH } from '../../../src/lib/backup/encryption.js';
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

describe('backup encryption (chunked AES-256-GCM)', () => {
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
