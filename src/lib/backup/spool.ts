import { open, type FileHandle } from 'node:fs/promises';

// Writes go out in batches of about this size: one system call per MiB, not per socket read.
const BATCH = 1024 * 1024;

/**
 * A file written front to back by one producer while a follower reads it in order, close
 * behind: the dump of one table is written by its own connection and hashed by a single
 * reader that takes the files in the order they make up the dump. Memory stays at a batch
 * or two whatever the size.
 */
export class Spool {
  /** Bytes on disk, readable by the follower. */
  private written = 0;
  private queued = 0;
  private ended = false;
  private failure: unknown;
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private inFlight: Promise<void> = Promise.resolve();
  private wake: (() => void) | undefined;

  private constructor(readonly path: string, private readonly handle: FileHandle) {}

  static async create(path: string): Promise<Spool> {
    return new Spool(path, await open(path, 'wx', 0o600));
  }

  /** Resolves when the caller may write more (at most one batch is being written meanwhile). */
  async write(data: Buffer | string): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (bytes.length === 0) return;
    this.batch.push(bytes);
    this.batchBytes += bytes.length;
    if (this.batchBytes >= BATCH) await this.flush();
  }

  async end(): Promise<void> {
    await this.flush();
    await this.inFlight;
    await this.handle.close();
    this.ended = true;
    this.notify();
  }

  /** Stops the follower with `error`; the file is left for the caller to remove. */
  async fail(error: unknown): Promise<void> {
    this.failure ??= error;
    this.notify();
    await this.inFlight.catch(() => undefined);
    await this.handle.close().catch(() => undefined);
  }

  /** Reads the whole file in order as it is written, up to its end. */
  async follow(onChunk: (chunk: Buffer) => void): Promise<void> {
    const reader = await open(this.path, 'r');
    try {
      const buffer = Buffer.allocUnsafe(BATCH);
      let position = 0;
      for (;;) {
        if (this.failure !== undefined) throw this.failure;
        if (position < this.written) {
          const { bytesRead } = await reader.read(buffer, 0, Math.min(BATCH, this.written - position), position);
          if (bytesRead === 0) throw new Error(`${this.path} is shorter than was written`);
          onChunk(buffer.subarray(0, bytesRead));
          position += bytesRead;
        } else if (this.ended) {
          return;
        } else {
          await new Promise<void>((resolve) => (this.wake = resolve));
        }
      }
    } finally {
      await reader.close();
    }
  }

  private async flush(): Promise<void> {
    await this.inFlight;
    if (this.batchBytes === 0) return;
    const buffers = this.batch;
    const length = this.batchBytes;
    const position = this.queued;
    this.batch = [];
    this.batchBytes = 0;
    this.queued += length;
    this.inFlight = writeAll(this.handle, buffers, length, position).then(
      () => {
        this.written += length;
        this.notify();
      },
      (error: unknown) => {
        this.failure ??= error;
        this.notify();
        throw error;
      },
    );
    // Awaited by the next write or end(), which may come only after this fails (a full disk):
    // until then the rejection would count as unhandled and end the process.
    this.inFlight.catch(() => undefined);
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

async function writeAll(handle: FileHandle, buffers: Buffer[], length: number, position: number): Promise<void> {
  let done = 0;
  let pending = buffers;
  while (done < length) {
    const { bytesWritten } = await handle.writev(pending, position + done);
    done += bytesWritten;
    if (done < length) pending = [Buffer.concat(pending).subarray(bytesWritten)];
  }
}
