import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../../src/lib/storage/open.js';

// Issue 24, item 4: with the driver's 16 MB page cache a validation on a 1M-license store made
// ten read syscalls instead of one (docs/performance.md). The daemon's connection gets a bigger
// cache and a memory map; commands and backups, which read most pages once, keep the defaults.
describe('SQLite page cache of the daemon connection', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-serving-cache-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const pragmas = async (db: Awaited<ReturnType<typeof openDatabase>>) => ({
    cache: (await db.query<{ cache_size: number }>('PRAGMA cache_size'))[0]!.cache_size,
    mmap: (await db.query<{ mmap_size: number }>('PRAGMA mmap_size'))[0]!.mmap_size,
  });

  it('is 64 MiB with the first 2 GiB mapped when serving, the driver defaults otherwise', async () => {
    const file = path.join(dir, 'data', 'license-server.db');
    const command = await openDatabase(file);
    const plain = await pragmas(command);
    await command.close();
    assert.equal(plain.mmap, 0, 'a command maps nothing');
    assert.ok(plain.cache > -65536 && plain.cache < 0, `a command keeps the driver's cache, got ${plain.cache}`);

    const daemon = await openDatabase(file, { serving: true });
    try {
      const serving = await pragmas(daemon);
      assert.equal(serving.cache, -65536);
      // 2 GiB asked; the driver's build caps the map just under it (SQLITE_MAX_MMAP_SIZE 0x7fff0000).
      assert.ok(serving.mmap >= 0x7fff0000, `mmap_size ${serving.mmap}`);
    } finally {
      await daemon.close();
    }
  });
});
