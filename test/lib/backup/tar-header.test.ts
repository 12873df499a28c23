import assert from 'node:assert/strict';
import { buffer } from 'node:stream/consumers';
import tar from 'tar-stream';
import { TAR_END, tarHeader, tarPadding } from '../../../src/lib/backup/archive/tar-header.js';

/** What tar-stream writes for one file entry of `size` bytes: its header block. */
async function tarStreamHeader(name: string, size: number, mtime: Date): Promise<Buffer> {
  const pack = tar.pack();
  const collected = buffer(pack);
  pack.entry({ name, size, mode: 0o600, mtime, type: 'file' }, Buffer.alloc(size));
  pack.finalize();
  return (await collected).subarray(0, 512);
}

describe('tar headers (archive framing)', () => {
  const mtime = new Date('2000-01-01T00:00:00Z');

  it('are the bytes tar-stream writes for the same entry, and tar-stream reads them back', async () => {
    for (const [name, size] of [['manifest.json', 0], ['database/postgres.sql', 1], ['config/effective.json', 511], ['notifications.json', 512], ['database/sqlite.db', 70_000]] as const) {
      assert.deepEqual(tarHeader({ name, size, mode: 0o600, mtime }), await tarStreamHeader(name, size, mtime), `${name} ${size}`);
    }
  });

  it('write sizes past 8 GiB in base-256, which tar-stream reads back', async () => {
    const size = 8 * 1024 ** 3 + 12345;
    const header = tarHeader({ name: 'database/sqlite.db', size, mode: 0o600, mtime });
    assert.equal(header[124], 0x80);
    const extract = tar.extract();
    const seen = new Promise<number | undefined>((resolve, reject) => {
      extract.on('entry', (entry: tar.Header, stream: { resume(): void }) => {
        resolve(entry.size);
        stream.resume();
        extract.destroy();
      });
      extract.on('error', reject);
    });
    extract.write(header);
    assert.equal(await seen, size);
  });

  it('pad entries to 512-byte blocks and end with two zero blocks', () => {
    assert.deepEqual([0, 1, 511, 512, 513].map((size) => tarPadding(size).length), [0, 511, 1, 0, 511]);
    assert.ok(TAR_END.equals(Buffer.alloc(1024)));
  });

  it('refuse names a ustar header cannot hold as given', () => {
    assert.throws(() => tarHeader({ name: 'x'.repeat(101), size: 0, mode: 0o600, mtime }), RangeError);
    assert.throws(() => tarHeader({ name: 'ü', size: 0, mode: 0o600, mtime }), RangeError);
  });
});
