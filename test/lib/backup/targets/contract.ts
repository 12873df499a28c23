import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { isTargetError, type BackupTarget, type TargetFailure } from '../../../../src/lib/backup/targets/target.js';

/** What a target kind's suite gives the contract: a fresh, empty target, and a view under it. */
export interface ContractSubject {
  readonly target: BackupTarget;
  /**
   * Everything the storage holds under the target's root, debris included (temporary names,
   * incomplete multipart uploads as `upload:<key>`), read without the target's own code.
   */
  raw(): Promise<string[]>;
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function sha256(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** `data` in chunks of at most 1 MiB, as a file stream would give it. */
export function chunked(data: Buffer, chunk = 1024 * 1024): () => Readable {
  return () => Readable.from((function* () {
    for (let at = 0; at < data.length; at += chunk) yield data.subarray(at, at + chunk);
  })());
}

export async function failure(work: Promise<unknown>): Promise<TargetFailure> {
  try {
    await work;
  } catch (error) {
    assert.ok(isTargetError(error), `expected a TargetError, got ${String(error)}`);
    return error.reason;
  }
  assert.fail('expected the target to fail');
}

/**
 * The behaviour every target kind shares (target.ts). `subject` makes a fresh empty target
 * for each case; `kind` names the suite.
 */
export function targetContract(kind: string, subject: () => Promise<ContractSubject>, options: { largeBytes?: number } = {}): void {
  describe(`the ${kind} target keeps the target contract`, function () {
    this.timeout(120_000);
    let current: ContractSubject | undefined;
    const fresh = async () => (current = await subject());
    afterEach(async () => {
      await current?.target.close();
      current = undefined;
    });

    it('passes its check, and holds nothing at first', async () => {
      const { target, raw } = await fresh();
      await target.check();
      assert.deepEqual(await target.list(), []);
      assert.deepEqual(await raw(), []);
    });

    it('gives back the bytes it was given, byte for byte, and lists them with their size', async () => {
      const { target } = await fresh();
      const data = randomBytes(300_000);
      await target.put('20261126T000000000Z-abcdef.backup.tar.gz.enc', chunked(data, 65_536), data.length);
      const got = await readAll(await target.get('20261126T000000000Z-abcdef.backup.tar.gz.enc'));
      assert.equal(sha256(got), sha256(data));
      const listed = await target.list();
      assert.deepEqual(listed.map(({ key, size }) => ({ key, size })), [{ key: '20261126T000000000Z-abcdef.backup.tar.gz.enc', size: data.length }]);
      assert.ok(listed[0]!.modified instanceof Date && !Number.isNaN(listed[0]!.modified.getTime()));
      const stat = await target.stat('20261126T000000000Z-abcdef.backup.tar.gz.enc');
      assert.equal(stat?.size, data.length);
      assert.equal(await target.stat('20261126T000000000Z-000000.backup.json'), undefined);
    });

    it('streams a large object (multipart where the kind has it) and gives it back whole', async () => {
      const { target } = await fresh();
      const data = randomBytes(options.largeBytes ?? 24 * 1024 * 1024);
      let progress = 0;
      await target.put('large.backup.tar.gz', chunked(data), data.length, { onProgress: (bytes) => (progress = bytes) });
      assert.equal(progress, data.length);
      const got = await readAll(await target.get('large.backup.tar.gz'));
      assert.equal(got.length, data.length);
      assert.equal(sha256(got), sha256(data));
    });

    it('replaces an object put again under the same key', async () => {
      const { target } = await fresh();
      await target.put('a.backup.json', chunked(Buffer.from('first')), 5);
      await target.put('a.backup.json', chunked(Buffer.from('second!')), 7);
      assert.equal((await readAll(await target.get('a.backup.json'))).toString(), 'second!');
      assert.deepEqual((await target.list()).map(({ key, size }) => `${key}:${size}`), ['a.backup.json:7']);
    });

    it('lists by prefix', async () => {
      const { target } = await fresh();
      for (const key of ['20261101T000000000Z-aaaaaa.backup.json', '20261102T000000000Z-bbbbbb.backup.json', 'other.txt']) {
        await target.put(key, chunked(Buffer.from(key)), key.length);
      }
      assert.deepEqual((await target.list('2026110')).map(({ key }) => key).sort(), ['20261101T000000000Z-aaaaaa.backup.json', '20261102T000000000Z-bbbbbb.backup.json']);
      assert.equal((await target.list()).length, 3);
    });

    it('refuses a body shorter or longer than its size, and shows nothing under the key', async () => {
      const { target } = await fresh();
      const data = randomBytes(100_000);
      await failure(target.put('short.backup.tar.gz', chunked(data), data.length + 1));
      await failure(target.put('long.backup.tar.gz', chunked(data), data.length - 1));
      assert.deepEqual(await target.list(), []);
      assert.equal(await target.stat('short.backup.tar.gz'), undefined);
    });

    it('shows nothing under the key when the body fails midway or the upload is aborted, and clears the debris', async () => {
      const { target, raw } = await fresh();
      const size = 12 * 1024 * 1024;
      const failing = () => Readable.from((async function* () {
        yield randomBytes(6 * 1024 * 1024);
        await new Promise((resolve) => setTimeout(resolve, 50));
        throw new Error('the disk under the archive failed');
      })());
      await assert.rejects(target.put('broken.backup.tar.gz', failing, size));
      const controller = new AbortController();
      const slow = () => Readable.from((async function* () {
        for (let i = 0; i < 12; i += 1) {
          if (i === 7) controller.abort();
          yield randomBytes(1024 * 1024);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })());
      await assert.rejects(target.put('aborted.backup.tar.gz', slow, size, { signal: controller.signal }));
      assert.deepEqual(await target.list(), []);
      await target.clearDebris(new Date(Date.now() + 1000));
      assert.deepEqual(await raw(), []);
    });

    it('leaves the debris of an upload started after the cut-off alone', async () => {
      const { target, raw } = await fresh();
      const cutOff = new Date(Date.now() - 60_000);
      const controller = new AbortController();
      let paused!: () => void;
      const reached = new Promise<void>((resolve) => (paused = resolve));
      const body = () => Readable.from((async function* () {
        yield randomBytes(6 * 1024 * 1024);
        paused();
        // Until the abort below ends the upload (a generator cannot be stopped mid-await, and a
        // target's put may wait for it to end).
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 60_000);
          controller.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          });
        });
      })());
      const upload = target.put('running.backup.tar.gz', body, 12 * 1024 * 1024, { signal: controller.signal }).catch(() => undefined);
      await reached;
      assert.equal(await target.clearDebris(cutOff), 0);
      controller.abort();
      await upload;
    });

    it('answers a missing object with "missing", and removes one quietly', async () => {
      const { target } = await fresh();
      assert.equal(await failure(target.get('nothing.backup.json').then(readAll)), 'missing');
      await target.delete('nothing.backup.json');
      await target.put('x.backup.json', chunked(Buffer.from('{}')), 2);
      await target.delete('x.backup.json');
      assert.deepEqual(await target.list(), []);
    });

    it('keeps uploads to different keys at the same time apart', async () => {
      const { target } = await fresh();
      const items = Array.from({ length: 4 }, (_, i) => ({ key: `k${i}.backup.tar.gz`, data: randomBytes(2 * 1024 * 1024 + i) }));
      await Promise.all(items.map(({ key, data }) => target.put(key, chunked(data), data.length)));
      for (const { key, data } of items) assert.equal(sha256(await readAll(await target.get(key))), sha256(data));
    });
  });
}
