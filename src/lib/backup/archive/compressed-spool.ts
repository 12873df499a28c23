import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import type { FileDigest } from './archive.js';
import { ParallelGzip } from './parallel-gzip.js';

/**
 * An archive entry compressed while it is produced: its bytes are hashed in order and
 * compressed on the thread pool into gzip members written to `path`, so that packing later
 * copies the members into the archive instead of reading and compressing the entry again
 * (gzip members concatenate into one stream: RFC 1952 section 2.2). Memory stays at a few
 * compression blocks whatever the size.
 */
export class CompressedSpool {
  private readonly hash = createHash('sha256');
  private size = 0;
  private readonly gzip: ParallelGzip;
  private readonly written: Promise<void>;
  private failure: unknown;

  constructor(readonly path: string, options: { level: number; windowBits?: number; blockSize?: number }) {
    this.gzip = new ParallelGzip(options);
    this.written = pipeline(this.gzip, createWriteStream(path, { mode: 0o600, flags: 'wx' }));
    this.written.catch((error: unknown) => {
      this.failure ??= error;
    });
  }

  /** Resolves when the caller may write more. */
  async write(data: Buffer | string): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (bytes.length === 0) return;
    this.hash.update(bytes);
    this.size += bytes.length;
    if (!this.gzip.write(bytes)) await Promise.race([once(this.gzip, 'drain'), this.written]);
  }

  /** Ends the entry: its size and SHA-256, and its members' lengths, once every member is on disk. */
  async end(): Promise<FileDigest & { readonly members: readonly number[] }> {
    if (this.failure !== undefined) throw this.failure;
    this.gzip.end();
    await this.written;
    return { size: this.size, sha256: this.hash.digest('hex'), members: this.gzip.members };
  }

  /** Stops writing; the file is left for the caller to remove. */
  async abort(error: unknown): Promise<void> {
    this.failure ??= error;
    this.gzip.destroy(error instanceof Error ? error : new Error(String(error)));
    await this.written.catch(() => undefined);
  }
}
