import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { PassThrough, Readable, Transform, type TransformCallback, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { LicenseServerError } from '../../errors.js';
import { DecryptStream, EncryptStream, MAGIC, sniff } from './encryption.js';
import { MemberGunzip } from './member-gunzip.js';
import { ParallelGzip } from './parallel-gzip.js';
import { TAR_END, tarHeader, tarPadding } from './tar-header.js';

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
  /** ...or gzip members (CompressedSpool) whose decompressed bytes are the entry, and their lengths... */
  readonly compressed?: { readonly path: string; readonly members: readonly number[] };
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

/**
 * Writes the archive to `target` and returns the size and SHA-256 of the file written, and
 * the length of each gzip member in it (for a read-back that inflates them in parallel).
 */
export async function writeArchive(
  target: string,
  entries: readonly ArchiveEntry[],
  options: { key?: Buffer; onProgress?: Progress } = {},
): Promise<FileDigest & { readonly members: readonly number[] }> {
  const hash = createHash('sha256');
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  const members: number[] = [];
  const stages: Array<NodeJS.ReadableStream | NodeJS.ReadWriteStream | NodeJS.WritableStream> = [
    Readable.from(gzipStream(tarRuns(entries), members, options.onProgress), { objectMode: false }),
  ];
  if (options.key) stages.push(new EncryptStream(options.key));
  stages.push(counter, createWriteStream(target, { mode: 0o600 }));
  await pipeline(stages as unknown as [Readable, Writable]);
  return { size, sha256: hash.digest('hex'), members };
}

/** A stretch of the tar stream: bytes still to compress, or an entry's data compressed ahead. */
type TarRun =
  | { readonly kind: 'raw'; readonly parts: Array<Buffer | { readonly path: string; readonly size: number }> }
  | { readonly kind: 'compressed'; readonly path: string; readonly members: readonly number[]; readonly size: number };

function tarRuns(entries: readonly ArchiveEntry[]): TarRun[] {
  const runs: TarRun[] = [];
  let raw: Array<Buffer | { path: string; size: number }> = [];
  for (const entry of entries) {
    raw.push(tarHeader({ name: entry.name, size: entry.size, mode: 0o600, mtime: MTIME }));
    if (entry.compressed !== undefined) {
      runs.push({ kind: 'raw', parts: raw }, { kind: 'compressed', ...entry.compressed, size: entry.size });
      raw = [];
    } else {
      raw.push(entry.data ?? { path: entry.path!, size: entry.size });
    }
    raw.push(tarPadding(entry.size));
  }
  raw.push(TAR_END);
  runs.push({ kind: 'raw', parts: raw });
  return runs;
}

/**
 * The archive's gzip stream: each raw run compressed on every core (ParallelGzip), each
 * compressed entry copied as it is. Concatenated gzip members are one gzip stream (RFC 1952
 * section 2.2), so a reader sees no seam. Progress counts entry bytes, a compressed entry's
 * in proportion to its members copied.
 */
async function* gzipStream(runs: readonly TarRun[], members: number[], onProgress?: Progress): AsyncGenerator<Buffer> {
  for (const run of runs) {
    if (run.kind === 'compressed') {
      const total = (await stat(run.path)).size;
      let copied = 0;
      let reported = 0;
      for await (const chunk of createReadStream(run.path, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>) {
        copied += chunk.length;
        const progress = Math.floor((run.size * copied) / Math.max(1, total));
        onProgress?.(progress - reported);
        reported = progress;
        yield chunk;
      }
      if (copied !== run.members.reduce((sum, length) => sum + length, 0)) throw new Error(`${run.path} does not hold the members it was written with`);
      members.push(...run.members);
      continue;
    }
    const gzip = new ParallelGzip({ level: GZIP_LEVEL });
    const feeding = pipeline(Readable.from(rawBytes(run.parts, onProgress), { objectMode: false }), gzip);
    // The iteration below sees the feeding's failure as the gzip stream's own error.
    feeding.catch(() => undefined);
    yield* gzip as AsyncIterable<Buffer>;
    await feeding;
    members.push(...gzip.members);
  }
}

async function* rawBytes(parts: ReadonlyArray<Buffer | { readonly path: string; readonly size: number }>, onProgress?: Progress): AsyncGenerator<Buffer> {
  for (const part of parts) {
    if (Buffer.isBuffer(part)) {
      if (part.length > 0) yield part;
      continue;
    }
    let read = 0;
    for await (const chunk of createReadStream(part.path, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>) {
      read += chunk.length;
      onProgress?.(chunk.length);
      yield chunk;
    }
    // The header already promised `size` bytes: a file that changed since would break the tar.
    if (read !== part.size) throw new Error(`${part.path} changed size while it was packed (${part.size} -> ${read} bytes)`);
  }
}

export interface ReadOptions {
  readonly key?: Buffer;
  readonly onProgress?: Progress;
  /** Also compute the SHA-256 of the whole file (to compare with its index). */
  readonly hashFile?: boolean;
  /**
   * The gzip members' lengths, when the caller wrote the file and knows them: they are then
   * inflated in parallel (MemberGunzip), with the same checks.
   */
  readonly members?: readonly number[];
}

const END_OF_ARCHIVE = TAR_END.length;

/**
 * Reads an archive, handing each entry to `onEntry` as a stream that must be consumed.
 * Decryption checks every chunk's tag before its bytes go on; gzip checks its CRC; entry
 * names are checked against ENTRY_NAMES before `onEntry` sees them. The layers must end
 * exactly together (docs/backup-format.md, "What a reader refuses"): nothing after the
 * last gzip member, no empty last member, and the tar data ending with its end-of-archive
 * marker and nothing after it. Returns the size of the file as read, and with `hashFile` its
 * SHA-256 (else an empty string).
 */
export async function readArchive(
  file: string,
  options: ReadOptions,
  onEntry: (name: EntryName, content: Readable, size: number) => Promise<void>,
): Promise<{ encrypted: boolean } & FileDigest> {
  const kind = await sniffFile(file);
  if (kind === 'encrypted' && !options.key) {
    throw new LicenseServerError('BACKUP_KEY_REQUIRED', 'the backup is encrypted and no backup.encryption_key is configured');
  }
  const extract = tar.extract();
  const source = createReadStream(file, { highWaterMark: 1024 * 1024 });
  const fileBytes = new ByteCounter(options.hashFile === true);
  if (options.onProgress) source.on('data', (chunk) => options.onProgress!(chunk.length));
  const gzipBytes = new ByteCounter(false);
  const gunzip: Transform & { bytesWritten: number } = options.members ? new MemberGunzip(options.members) : createGunzip({ chunkSize: 1024 * 1024 });
  const tarBytes = new ByteCounter(false);
  const stages: Array<NodeJS.ReadableStream | NodeJS.ReadWriteStream | NodeJS.WritableStream> = [source, fileBytes];
  if (kind === 'encrypted') stages.push(new DecryptStream(options.key!));
  stages.push(gzipBytes, gunzip, tarBytes, extract);
  // Errors these streams emit are the file's damage; any other failure (a disk, a bug) is not.
  const damage = new Set<unknown>();
  for (const stream of [gunzip, extract]) (stream as Transform).on('error', (error: unknown) => damage.add(error));
  const translate = (error: unknown) => translateReadError(error, damage);
  const unpacking = pipeline(stages as unknown as [Readable, Writable]).catch((error: unknown) => {
    throw translate(error);
  });
  let tarEnd = 0;
  const consuming = (async () => {
    for await (const entry of extract as unknown as AsyncIterable<Readable & { header: tar.Header & { byteOffset?: number } }>) {
      const { name, type, size, byteOffset } = entry.header;
      if (type !== 'file' || !(ENTRY_NAMES as readonly string[]).includes(name)) {
        entry.resume();
        throw new LicenseServerError('BACKUP_INVALID', `the archive holds an unexpected entry ${JSON.stringify(String(name).slice(0, 100))} (${type})`);
      }
      if (typeof byteOffset !== 'number') throw new Error('tar-stream no longer reports where an entry\'s data starts');
      tarEnd = byteOffset + Math.ceil((size ?? 0) / 512) * 512;
      await onEntry(name as EntryName, entry, size ?? 0);
    }
  })().catch((error: unknown) => {
    source.destroy();
    throw translate(error);
  });
  // Whichever fails first names the problem; the other is then aborted with it. Both are
  // awaited all the same: a caller must never see this return while its onEntry still runs
  // (a restore's onEntry opens a database transaction that it then has to close).
  let failure: { error: unknown } | undefined;
  const settle = (work: Promise<unknown>) => work.catch((error: unknown) => void (failure ??= { error }));
  await Promise.all([settle(unpacking), settle(consuming)]);
  if (failure) throw failure.error;
  if (gunzip.bytesWritten !== gzipBytes.bytes) {
    throw corrupt(`${byteCount(gzipBytes.bytes - gunzip.bytesWritten)} after the end of its gzip data`);
  }
  // An empty gzip member is 20 bytes ending in CRC-32 0 and length 0; license-server never
  // writes one, and appended after the archive it would add no data for the checks below.
  if (gzipBytes.tail.every((byte) => byte === 0)) throw corrupt('it ends with an empty gzip member');
  if (tarBytes.bytes !== tarEnd + END_OF_ARCHIVE) {
    throw corrupt(
      tarBytes.bytes < tarEnd + END_OF_ARCHIVE
        ? 'its tar data ends without the end-of-archive marker'
        : `${byteCount(tarBytes.bytes - tarEnd - END_OF_ARCHIVE)} after its tar end-of-archive marker`,
    );
  }
  return { encrypted: kind === 'encrypted', ...fileBytes.digest() };
}

/** Counts (and, when asked, hashes) the bytes that pass, and keeps the last 8 of them. */
class ByteCounter extends Transform {
  bytes = 0;
  tail = Buffer.alloc(0);
  private readonly hash;

  constructor(hash: boolean) {
    super();
    this.hash = hash ? createHash('sha256') : undefined;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    this.hash?.update(chunk);
    this.tail = Buffer.concat([this.tail, chunk.subarray(Math.max(0, chunk.length - 8))]).subarray(-8);
    done(null, chunk);
  }

  digest(): FileDigest {
    return { size: this.bytes, sha256: this.hash ? this.hash.digest('hex') : '' };
  }
}

/** SHA-256 and size of a stream, for checking entries against the manifest and copies against their index. */
export async function digestOf(content: Readable, sink?: Writable, onProgress?: Progress): Promise<FileDigest> {
  const hash = createHash('sha256');
  let size = 0;
  const tap = new PassThrough();
  tap.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    size += chunk.length;
    onProgress?.(size);
  });
  if (sink) await pipeline(content, tap, sink);
  else await pipeline(content, tap, new PassThrough().resume() as unknown as Writable);
  return { size, sha256: hash.digest('hex') };
}

export async function digestFile(file: string): Promise<FileDigest> {
  return digestOf(createReadStream(file, { highWaterMark: 1024 * 1024 }));
}

async function sniffFile(file: string): Promise<'encrypted' | 'gzip'> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    throw new LicenseServerError('BACKUP_NOT_FOUND', `cannot open ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  let first: Buffer;
  try {
    const bytes = Buffer.alloc(MAGIC.length);
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    first = bytes.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
  const kind = sniff(first);
  if (kind !== 'unknown') return kind;
  // What could be the start of either kind is a backup cut short, not a stranger's file.
  if (first.length === 0) throw corrupt('the file is empty');
  if (first.length < MAGIC.length && (MAGIC.subarray(0, first.length).equals(first) || GZIP_MAGIC.subarray(0, first.length).equals(first))) {
    throw corrupt(`it is truncated to ${byteCount(first.length)}`);
  }
  throw new LicenseServerError('BACKUP_INVALID', `${file} is not a license-server backup (neither gzip nor an encrypted backup)`);
}

const GZIP_MAGIC = Buffer.from([0x1f, 0x8b]);

function byteCount(n: number): string {
  return n === 1 ? '1 byte' : `${n} bytes`;
}

function corrupt(reason: string): LicenseServerError {
  return new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${reason}`);
}

function translateReadError(error: unknown, damage: ReadonlySet<unknown>): unknown {
  if (error instanceof LicenseServerError) return error;
  // A failing disk is not a damaged file: fs errors carry the system call that failed.
  if (damage.has(error) && !(error as NodeJS.ErrnoException).syscall) {
    return corrupt(`${String((error as Error).message ?? error).split('\n')[0]} (the gzip or tar data is broken)`);
  }
  return error;
}
