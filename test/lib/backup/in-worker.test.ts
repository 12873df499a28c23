import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
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

  it("does not keep a finished command's process alive while the worker waits for more", async function () {
    this.timeout(60_000);
    const module = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../src/lib/backup/in-worker.ts');
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `
      const { inWorker } = await import(${JSON.stringify(module)});
      await inWorker('writeArchive', [${JSON.stringify(path.join(work, 'b.tar.gz'))}, [], undefined]);
      console.log('done');
    `], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let doneAt: number | undefined;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (doneAt === undefined && stdout.includes('done')) doneAt = Date.now();
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const [code] = (await once(child, 'exit')) as [number | null];
    const exitedAt = Date.now();
    assert.equal(stdout.trim(), 'done', stderr);
    assert.equal(code, 0);
    // From the command's last line to its exit, not from its start: the start (tsx compiling
    // the modules) took 11 s in a starved CI run. The worker's idle timer is 10 s; a process
    // that waited for it would take that long after 'done'.
    assert.ok(exitedAt - doneAt! < 5_000, `exited ${exitedAt - doneAt!} ms after its last line`);
  });
});
