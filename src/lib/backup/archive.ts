import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { PassThrough, Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { LicenseServerError } from '../errors.js';
import { DecryptStream, EncryptStream, sniff } from './encryption.js';
import { ParallelGzip } from './parallel-gzip.js';

/**
 * The archive (docs/backup-format.md): a tar file whose first entry is manifest.json,
 * gzip-compressed, and encrypted when a key is configured. Only the entry names below may
 * appear; anything else (`../x`, `/etc/passwd`, links) makes the archive invalid before a
 * byte of it is written anywhere.
 */
export const ENTRY_NAMES = [
  'manifest.json',
  'database/sqlite.db',
  'database/postgres.sql',
  'config/config.yaml',
  'config/effective.json',
  'notifications.json',
] as const;
export type EntryName = (typeof ENTRY_NAMES)[number];

export interface ArchiveEntry {
  readonly name: EntryName;
  /** A file on disk, streamed into the archive... */
  readonly path?: string;
  /** ...or bytes held in memory (small entries only). */
  readonly data?: Buffer;
  readonly size: number;
}

export interface FileDigest {
  readonly size: number;
  readonly sha256: string;
}

export type Progress = (bytes: number) => void;

// gzip -1: the baseline's level; database pages compress about 2:1 at it.
const GZIP_LEVEL = 1;
// A fixed time in the tar headers: the archive's bytes depend on the data, not the clock.
const MTIME = new Date('2000-01-01T00:00:00Z');

/** Writes the archive to `target` and returns the size and SHA-256 of the file written. */
export async function writeArchive(
  target: string,
  entries: readonly ArchiveEntry[],
  options: { key?: Buffer; onProgress?: Progress } = {},
): Promise<FileDigest> {
  const pack = tar.pack();
  const hash = createHash('sha256');
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  const feeding = (async () => {
    for (const entry of entries) {
      await new Promise<void>((resolve, reject) => {
        const sink = pack.entry({ name: entry.name, size: entry.size, mode: 0o600, mtime: MTIME, type: 'file' }, (error) =>
          error ? reject(error) : resolve(),
        );
        if (entry.data) {
          sink.end(entry.data);
        } else {
          const source = createReadStream(entry.path!, { highWaterMark: 1024 * 1024 });
          source.on('data', (chunk) => options.onProgress?.(chunk.length));
          source.on('error', reject);
          source.pipe(sink as unknown as Writable);
        }
      });
    }
    pack.finalize();
  })();
  const stages: Array<NodeJS.ReadableStream | NodeJS.ReadWriteStream | NodeJS.WritableStream> = [
    pack as unknown as Readable,
    new ParallelGzip({ level: GZIP_LEVEL }),
  ];
  if (options.key) stages.push(new EncryptStream(options.key));
  stages.push(counter, createWriteStream(target, { mode: 0o600 }));
  await Promise.all([pipeline(stages as unknown as [Readable, Writable]), feeding]);
  return { size, sha256: hash.digest('hex') };
}

export interface ReadOptions {
  readonly key?: Buffer;
  readonly onProgress?: Progress;
}

/**
 * Reads an archive, handing each entry to `onEntry` as a stream that must be consumed.
 * Decryption checks every chunk's tag before its bytes go on; gzip checks its CRC; entry
 * names are checked against ENTRY_NAMES before `onEntry` sees them.
 */
export async function readArchive(
  file: string,
  options: ReadOptions,
  onEntry: (name: EntryName, content: Readable, size: number) => Promise<void>,
): Promise<{ encrypted: boolean }> {
  const kind = await sniffFile(file);
  if (kind === 'unknown') throw new LicenseServerError('BACKUP_INVALID', `${file} is not a license-server backup (neither gzip nor an encrypted backup)`);
  if (kind === 'encrypted' && !options.key) {
    throw new LicenseServerError('BACKUP_KEY_REQUIRED', 'the backup is encrypted and no backup.encryption_key is configured');
  }
  const extract = tar.extract();
  const source = createReadStream(file, { highWaterMark: 1024 * 1024 });
  if (options.onProgress) source.on('data', (chunk) => options.onProgress!(chunk.length));
  const stages: Array<NodeJS.ReadableStream | NodeJS.ReadWriteStream | NodeJS.WritableStream> = [source];
  if (kind === 'encrypted') stages.push(new DecryptStream(options.key!));
  stages.push(createGunzip({ chunkSize: 1024 * 1024 }));
  const unpacking = pipeline([...stages, extract] as unknown as [Readable, Writable]).catch((error: unknown) => {
    throw translateReadError(error);
  });
  const consuming = (async () => {
    for await (const entry of extract as unknown as AsyncIterable<Readable & { header: tar.Header }>) {
      const { name, type, size } = entry.header;
      if (type !== 'file' || !(ENTRY_NAMES as readonly string[]).includes(name)) {
        entry.resume();
        throw new LicenseServerError('BACKUP_INVALID', `the archive holds an unexpected entry ${JSON.stringify(String(name).slice(0, 100))} (${type})`);
      }
      await onEntry(name as EntryName, entry, size ?? 0);
    }
  })();
  // Whichever fails first names the problem; the other is then aborted with it.
  await Promise.all([
    unpacking,
    consuming.catch((error: unknown) => {
      source.destroy();
      throw error;
    }),
  ]);
  return { encrypted: kind === 'encrypted' };
}

/** SHA-256 and size of a stream, for checking entries against the manifest. */
export async function digestOf(content: Readable, sink?: Writable): Promise<FileDigest> {
  const hash = createHash('sha256');
  let size = 0;
  const tap = new PassThrough();
  tap.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    size += chunk.length;
  });
  if (sink) await pipeline(content, tap, sink);
  else await pipeline(content, tap, new PassThrough().resume() as unknown as Writable);
  return { size, sha256: hash.digest('hex') };
}

export async function digestFile(file: string): Promise<FileDigest> {
  return digestOf(createReadStream(file, { highWaterMark: 1024 * 1024 }));
}

async function sniffFile(file: string): Promise<'encrypted' | 'gzip' | 'unknown'> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    throw new LicenseServerError('BACKUP_NOT_FOUND', `cannot open ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  try {
    const first = Buffer.alloc(4);
    const { bytesRead } = await handle.read(first, 0, 4, 0);
    return sniff(first.subarray(0, bytesRead));
  } finally {
    await handle.close();
  }
}

function translateReadError(error: unknown): unknown {
  if (error instanceof LicenseServerError) return error;
  const code = (error as { code?: string }).code ?? '';
  const message = (error as Error).message ?? '';
  if (code.startsWith('Z_') || /unexpected end|incorrect header|invalid|Unexpected end of data|Invalid tar header/i.test(message)) {
    return new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${message.split('\n')[0]}`);
  }
  return error;
}
