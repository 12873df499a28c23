import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { LicenseServerError } from '../../errors.js';
import { digestOf, readArchive, type EntryName, type FileDigest, type Progress } from './archive.js';
import { parseManifest, type Manifest } from './manifest.js';

export interface VerifiedArchive {
  readonly manifest: Manifest;
  readonly encrypted: boolean;
  /** Where each extracted entry was written (only when `extractTo` was given). */
  readonly files: ReadonlyMap<EntryName, string>;
  /** The size of the file as read, and its SHA-256 when `hashFile` or `expected` was given (else ''). */
  readonly digest: FileDigest;
}

/**
 * Reads a whole archive and checks it: every chunk's tag (encrypted files), the gzip CRC,
 * the manifest first, and each entry's size and SHA-256 against the manifest, none missing,
 * none extra; with `expected` (from the backup's index), the whole file's size and SHA-256.
 * With `extractTo`, entries are also written there (flat, under fixed names)
 * as they are checked; a caller uses them only after this resolves.
 */
export async function verifyArchive(
  file: string,
  options: {
    key?: Buffer;
    extractTo?: string;
    onProgress?: Progress;
    expected?: FileDigest;
    hashFile?: boolean;
    members?: readonly number[];
    /**
     * Called with the manifest before any other entry is read; it may return consumers
     * that receive entries as they are read, instead of their being extracted (a restore
     * that loads the dump meanwhile). A consumer's failure is thrown only once the whole
     * archive has been checked: if the archive is damaged, that is the error instead.
     */
    onManifest?: (manifest: Manifest) => Promise<EntryConsumers | undefined>;
  },
): Promise<VerifiedArchive> {
  let manifest: Manifest | undefined;
  let consumers: EntryConsumers | undefined;
  let consumerFailure: { error: unknown } | undefined;
  const seen = new Set<string>();
  const files = new Map<EntryName, string>();
  const { encrypted, size, sha256 } = await readArchive(file, { ...options, hashFile: options.hashFile === true || options.expected !== undefined }, async (name, content: Readable, entrySize) => {
    checkInMemoryLimit(name, entrySize);
    if (!manifest) {
      if (name !== 'manifest.json') throw new LicenseServerError('BACKUP_INVALID', 'the archive does not start with manifest.json');
      manifest = parseManifest(await readLimited(content, IN_MEMORY_LIMITS['manifest.json']));
      consumers = await options.onManifest?.(manifest);
      return;
    }
    const listed = manifest.entries.find((entry) => entry.name === name);
    if (!listed) throw new LicenseServerError('BACKUP_INVALID', `the archive holds ${name}, which its manifest does not list`);
    if (seen.has(name)) throw new LicenseServerError('BACKUP_INVALID', `the archive holds ${name} twice`);
    seen.add(name);
    const consumer = consumers?.[name as EntryName];
    if (consumer) {
      const digest = await digestWhileConsuming(content, consumer);
      if (digest.failure && !consumerFailure) consumerFailure = digest.failure;
      checkDigest(name, digest, listed);
      return;
    }
    let target: string | undefined;
    if (options.extractTo) {
      target = path.join(options.extractTo, name.replace(/\//g, '__'));
      files.set(name, target);
    }
    checkDigest(name, await digestOf(content, target ? createWriteStream(target, { mode: 0o600 }) : undefined), listed);
  });
  // A listed backup's index holds the archive's exact size and SHA-256: nothing may differ.
  if (options.expected && (size !== options.expected.size || sha256 !== options.expected.sha256)) {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: the archive file differs from the size and SHA-256 its index says (${options.expected.size} bytes)`);
  }
  if (!manifest) throw new LicenseServerError('BACKUP_INVALID', 'the archive is empty');
  for (const entry of manifest.entries) {
    if (!seen.has(entry.name)) throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${entry.name} is missing`);
  }
  if (consumerFailure) throw consumerFailure.error;
  return { manifest, encrypted, files, digest: { size, sha256 } };
}

/**
 * Entries that a reader takes whole into memory (the manifest to parse it, the configuration
 * file to merge it on restore), and the most of each it accepts. Their sizes come from the
 * tar header, before a byte is inflated: a small archive whose manifest inflates to 900 MB is
 * refused at once instead of filling memory. The database entries are streamed and have none.
 */
export const IN_MEMORY_LIMITS = { 'manifest.json': 1024 * 1024, 'config/config.yaml': 4 * 1024 * 1024 } as const satisfies Partial<Record<EntryName, number>>;

function checkInMemoryLimit(name: EntryName, size: number): void {
  const limit = (IN_MEMORY_LIMITS as Partial<Record<EntryName, number>>)[name];
  if (limit !== undefined && size > limit) {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${name} has ${size} bytes, more than the ${limit} a reader accepts`);
  }
}

/** An entry's text, refused (rather than held) past `limit` bytes whatever its header said. */
async function readLimited(content: Readable, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of content as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > limit) throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: an entry read into memory is longer than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, length).toString('utf8');
}

/** Receives one entry's bytes as they are read and checked. */
export type EntryConsumers = Partial<Record<EntryName, (content: AsyncIterable<Buffer>) => Promise<void>>>;

function checkDigest(name: string, digest: FileDigest, listed: FileDigest): void {
  if (digest.size !== listed.size || digest.sha256 !== listed.sha256) {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${name} does not match its checksum in the manifest`);
  }
}

/**
 * Hashes an entry while `consume` reads it. A consumer that fails stops receiving bytes, but
 * the entry is still read and hashed to its end, so that damage is told apart from a
 * consumer's own failure (a loader refusing garbage that a later CRC would have caught).
 */
async function digestWhileConsuming(content: Readable, consume: (content: AsyncIterable<Buffer>) => Promise<void>): Promise<FileDigest & { failure?: { error: unknown } }> {
  const hash = createHash('sha256');
  let size = 0;
  const feed = new PassThrough({ highWaterMark: 1024 * 1024 });
  let settled = false;
  let failure: { error: unknown } | undefined;
  const consuming = consume(feed).then(
    () => {
      settled = true;
    },
    (error: unknown) => {
      settled = true;
      failure = { error };
      feed.destroy();
    },
  );
  try {
    for await (const chunk of content as AsyncIterable<Buffer>) {
      hash.update(chunk);
      size += chunk.length;
      if (!settled && !feed.write(chunk)) await Promise.race([once(feed, 'drain').catch(() => undefined), consuming]);
    }
  } catch (error) {
    // The archive failed under the consumer: it stops too, before the error goes on.
    feed.destroy(error instanceof Error ? error : new Error(String(error)));
    await consuming;
    throw error;
  }
  if (!settled) feed.end();
  await consuming;
  return { size, sha256: hash.digest('hex'), failure };
}
