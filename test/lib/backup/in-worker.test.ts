import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { inWorker } from '../../../src/lib/backup/in-worker.js';

describe('backup steps on a worker thread (inWorker)', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-in-worker-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('writes and reads back an archive there, reporting progress, with Buffers arriving as Buffers', async () => {
    const target = path.join(work, 'a.tar.gz');
    const data = Buffer.from('x'.repeat(3 * 1024 * 1024));
    const file = path.join(work, 'snapshot');
    writeFileSync(file, data);
    let progress = 0;
    const entries = [
      { name: 'notifications.json' as const, data, size: data.length },
      { name: 'database/sqlite.db' as const, path: file, size: data.length },
    ];
    const written = await inWorker('writeArchive', [target, entries, undefined], (bytes) => (progress += bytes));
    // Progress counts the bytes read from files (in-memory entries are small by design).
    assert.equal(progress, data.length);
    assert.ok(written.members.length >= 2);
    // The manifest check fails (there is none), with its own code, through the thread boundary.
    await assert.rejects(inWorker('verifyWritten', [target, undefined, written.members]), (error: unknown) => {
      assert.ok(error instanceof LicenseServerError);
      assert.equal(error.code, 'BACKUP_INVALID');
      return true;
    });
  });

  it('gives back a system error with its code and system call, as the callers map them', async () => {
    writeFileSync(path.join(work, 'file'), '');
    await assert.rejects(inWorker('writeArchive', [path.join(work, 'file', 'below'), [], undefined]), (error: NodeJS.ErrnoException) => {
      assert.equal(error.code, 'ENOTDIR');
      assert.equal(error.syscall, 'open');
      return true;
    });
  });

  it("does not keep a finished command's process alive while the worker waits for more", function () {
    this.timeout(20_000);
    const module = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../src/lib/backup/in-worker.ts');
    const started = Date.now();
    const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `
      const { inWorker } = await import(${JSON.stringify(module)});
      await inWorker('writeArchive', [${JSON.stringify(path.join(work, 'b.tar.gz'))}, [], undefined]);
      console.log('done');
    `], { encoding: 'utf8', timeout: 15_000 });
    assert.equal(result.stdout.trim(), 'done', result.stderr);
    assert.equal(result.status, 0);
    // The worker's idle timer is 10 s; a process that waited for it would take that long.
    assert.ok(Date.now() - started < 9_000, `took ${Date.now() - started} ms`);
  });
});
