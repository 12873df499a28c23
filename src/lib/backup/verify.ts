import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { LicenseServerError } from '../errors.js';
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
  options: { key?: Buffer; extractTo?: string; onProgress?: Progress; expected?: FileDigest; hashFile?: boolean; members?: readonly number[] },
): Promise<VerifiedArchive> {
  let manifest: Manifest | undefined;
  const seen = new Set<string>();
  const files = new Map<EntryName, string>();
  const { encrypted, size, sha256 } = await readArchive(file, { ...options, hashFile: options.hashFile === true || options.expected !== undefined }, async (name, content: Readable) => {
    if (!manifest) {
      if (name !== 'manifest.json') throw new LicenseServerError('BACKUP_INVALID', 'the archive does not start with manifest.json');
      manifest = parseManifest(await text(content));
      return;
    }
    const listed = manifest.entries.find((entry) => entry.name === name);
    if (!listed) throw new LicenseServerError('BACKUP_INVALID', `the archive holds ${name}, which its manifest does not list`);
    if (seen.has(name)) throw new LicenseServerError('BACKUP_INVALID', `the archive holds ${name} twice`);
    seen.add(name);
    let target: string | undefined;
    if (options.extractTo) {
      target = path.join(options.extractTo, name.replace(/\//g, '__'));
      files.set(name, target);
    }
    const digest = await digestOf(content, target ? createWriteStream(target, { mode: 0o600 }) : undefined);
    if (digest.size !== listed.size || digest.sha256 !== listed.sha256) {
      throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${name} does not match its checksum in the manifest`);
    }
  });
  // A listed backup's index holds the archive's exact size and SHA-256: nothing may differ.
  if (options.expected && (size !== options.expected.size || sha256 !== options.expected.sha256)) {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: the archive file differs from the size and SHA-256 its index says (${options.expected.size} bytes)`);
  }
  if (!manifest) throw new LicenseServerError('BACKUP_INVALID', 'the archive is empty');
  for (const entry of manifest.entries) {
    if (!seen.has(entry.name)) throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${entry.name} is missing`);
  }
  return { manifest, encrypted, files, digest: { size, sha256 } };
}
