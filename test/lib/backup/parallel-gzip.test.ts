import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { gunzipSync } from 'node:zlib';
import { ParallelGzip } from '../../../src/lib/backup/archive/parallel-gzip.js';

describe('parallel gzip', () => {
  it('writes one valid gzip file of concatenated members, in order, that gunzip and Node read back', async () => {
    for (const length of [0, 10, 4096, 100_000, 1_000_003]) {
      // Half compressible, half random, so that blocks compress at different speeds.
      const input = Buffer.concat([Buffer.alloc(Math.floor(length / 2), 'license '), randomBytes(Math.ceil(length / 2))]);
      const pieces = [];
      for (let i = 0; i < input.length; i += 7777) pieces.push(input.subarray(i, i + 7777));
      const compressed = await buffer(Readable.from(pieces).pipe(new ParallelGzip({ blockSize: 64 * 1024, parallelism: 2 })));
      assert.deepEqual(gunzipSync(compressed), input, `Node, length ${length}`);
      assert.deepEqual(execFileSync('gzip', ['-dc'], { input: compressed, maxBuffer: 1 << 26 }), input, `gzip -dc, length ${length}`);
    }
  });
});
