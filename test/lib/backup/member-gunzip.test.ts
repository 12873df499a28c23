import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import { gunzipSync } from 'node:zlib';
import { MemberGunzip } from '../../../src/lib/backup/archive/member-gunzip.js';
import { ParallelGzip } from '../../../src/lib/backup/archive/parallel-gzip.js';
import { prng } from '../../support/prng.js';

/** Text that compresses (rows of a dump, roughly) mixed with bytes that do not. */
function sample(size: number, seed: number): Buffer {
  const random = prng(seed);
  const parts: Buffer[] = [];
  let length = 0;
  while (length < size) {
    const part = random() < 0.2 ? randomBytes(1 + Math.floor(random() * 5000)) : Buffer.from(`${Math.floor(random() * 1e9)}\tcustomer ${'x'.repeat(Math.floor(random() * 300))}\n`);
    parts.push(part);
    length += part.length;
  }
  return Buffer.concat(parts).subarray(0, size);
}

async function compress(data: Buffer): Promise<{ gz: Buffer; members: number[] }> {
  const gzip = new ParallelGzip({ blockSize: 64 * 1024, parallelism: 2 });
  const pieces = [];
  for (let i = 0; i < data.length; i += 16_384) pieces.push(data.subarray(i, i + 16_384));
  const gz = await buffer(Readable.from(pieces).pipe(gzip));
  return { gz, members: gzip.members };
}

/** Feeds `gz` in pieces of `step` bytes; returns the output and the input bytes the members used. */
async function inflate(gz: Buffer, members: readonly number[], step: number): Promise<{ out: Buffer; used: number }> {
  const pieces = [];
  for (let i = 0; i < gz.length; i += step) pieces.push(gz.subarray(i, i + step));
  const gunzip = new MemberGunzip(members);
  const chunks: Buffer[] = [];
  gunzip.on('data', (chunk: Buffer) => chunks.push(chunk));
  await pipeline(Readable.from(pieces), gunzip);
  return { out: Buffer.concat(chunks), used: gunzip.bytesWritten };
}

describe('parallel gunzip of known members (MemberGunzip)', () => {
  it('gives what a sequential gunzip gives, whatever the input pieces, and counts every byte', async () => {
    const data = sample(1_500_000, 7);
    const { gz, members } = await compress(data);
    assert.ok(members.length > 10);
    assert.equal(members.reduce((a, b) => a + b, 0), gz.length);
    for (const step of [1 << 20, 65_536, 4096, 777]) {
      const { out, used } = await inflate(gz, members, step);
      assert.ok(out.equals(data), `step ${step}`);
      assert.ok(out.equals(gunzipSync(gz)));
      assert.equal(used, gz.length);
    }
  });

  it('refuses member lengths that do not match the stream: a boundary moved either way, a truncation', async () => {
    const { gz, members } = await compress(sample(600_000, 8));
    // (Two members given as one slice are inflated together by zlib, which is still exactly
    // the sequential decoding, so that is not refused.)
    await assert.rejects(inflate(gz, [members[0]! + 1, members[1]! - 1, ...members.slice(2)], 65_536));
    const moved = [members[0]! - 1, members[1]! + 1, ...members.slice(2)];
    await assert.rejects(inflate(gz, moved, 65_536));
    await assert.rejects(inflate(gz.subarray(0, gz.length - 3), members, 65_536), /unexpected end of file/);
  });

  it('leaves bytes after the last member uncounted, for the reader to report', async () => {
    const { gz, members } = await compress(sample(300_000, 9));
    const { used } = await inflate(Buffer.concat([gz, Buffer.from('appended')]), members, 65_536);
    assert.equal(used, gz.length);
  });

  it('fails on a damaged member (its CRC)', async () => {
    const { gz, members } = await compress(sample(300_000, 10));
    const damaged = Buffer.from(gz);
    const crcOfFirst = members[0]! - 8;
    damaged[crcOfFirst] = damaged[crcOfFirst]! ^ 0xff;
    await assert.rejects(inflate(damaged, members, 65_536), /incorrect data check|invalid/);
  });
});
