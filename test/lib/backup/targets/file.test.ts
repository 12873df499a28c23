import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openFileTarget } from '../../../../src/lib/backup/targets/file.js';
import { chunked, failure, targetContract } from './contract.js';

const made: string[] = [];
after(async () => {
  for (const directory of made) await rm(directory, { recursive: true, force: true });
});
async function freshDirectory(): Promise<string> {
  const directory = await mkdtemp(path.join(tmpdir(), 'ls-file-target-'));
  made.push(directory);
  return directory;
}

targetContract('file', async () => {
  const directory = await freshDirectory();
  return { target: openFileTarget({ name: 'nas', directory }), raw: () => readdir(directory) };
});

describe('the file target', () => {
  it('refuses a directory that is not there, and never creates it (an unmounted NAS)', async () => {
    const directory = path.join(await freshDirectory(), 'mnt', 'nas');
    const target = openFileTarget({ name: 'nas', directory });
    assert.equal(await failure(target.check()), 'missing');
    assert.equal(await failure(target.put('a.backup.json', chunked(Buffer.from('{}')), 2)), 'missing');
    await assert.rejects(stat(path.join(directory, '..')), { code: 'ENOENT' });
  });

  it('refuses keys that would leave its directory or hide among debris', async () => {
    const target = openFileTarget({ name: 'nas', directory: await freshDirectory() });
    for (const key of ['../x.backup.json', 'sub/x.backup.json', '.tmp-1-00000000-x', '']) {
      assert.equal(await failure(target.put(key, chunked(Buffer.from('{}')), 2)), 'protocol', key);
    }
  });
});
