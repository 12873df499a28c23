import { lstat, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { LicenseServerError } from '../errors.js';
import { writeFileDurably } from '../files/durable-write.js';
import { kindOf, openRegularFile, readSmallRegularFile } from '../files/regular-file.js';
import type { Engine } from '../storage/types.js';
import { MAGIC, sniff } from './archive/encryption.js';
import { BACKUP_ID, type Manifest, type Trigger } from './archive/manifest.js';

/**
 * The backup directory: `<id>.backup.tar.gz[.enc]` archives, each listed by an index file
 * `<id>.backup.json` written only after the archive was read back and verified. A backup
 * without its index is not listed, not pruned into, and not restorable by id: it is either
 * still being written or was never completed.
 */
export interface BackupRecord {
  readonly backup_id: string;
  readonly created_at: string;
  readonly trigger: Trigger;
  readonly engine: Engine;
  readonly schema_version: number;
  readonly encrypted: boolean;
  readonly tool_version: string;
  /** The archive's file name in the backup directory. */
  readonly file: string;
  readonly size: number;
  readonly sha256: string;
  readonly verified_at: string;
  /** From the manifest, when it lists them (backups of this release on). */
  readonly signing_keys?: Manifest['signing_keys'];
}

export function archiveName(id: string, encrypted: boolean): string {
  return `${id}.backup.tar.gz${encrypted ? '.enc' : ''}`;
}

export function indexName(id: string): string {
  return `${id}.backup.json`;
}

/** The text of an index file as it is written, here and on every off-site target. */
export function indexText(record: BackupRecord): string {
  return `${JSON.stringify(record, null, 2)}\n`;
}

/** An index read back (here or from a target), or undefined when it is not the index of `id`. */
export function parseIndex(text: string, id: string): BackupRecord | undefined {
  try {
    const record = JSON.parse(text) as BackupRecord;
    if (typeof record !== 'object' || record === null || record.backup_id !== id || record.file !== archiveName(id, record.encrypted)) return undefined;
    if (!Number.isSafeInteger(record.size) || record.size < 0 || typeof record.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(record.sha256)) return undefined;
    return record;
  } catch {
    return undefined;
  }
}

export function recordFrom(manifest: Manifest, file: { name: string; size: number; sha256: string }, encrypted: boolean, verifiedAt: Date): BackupRecord {
  return {
    backup_id: manifest.backup_id,
    created_at: manifest.created_at,
    trigger: manifest.trigger,
    engine: manifest.engine,
    schema_version: manifest.schema_version,
    encrypted,
    tool_version: manifest.tool_version,
    file: file.name,
    size: file.size,
    sha256: file.sha256,
    verified_at: verifiedAt.toISOString(),
    ...(manifest.signing_keys ? { signing_keys: manifest.signing_keys } : {}),
  };
}

export async function writeIndex(directory: string, record: BackupRecord): Promise<void> {
  await writeFileDurably(path.join(directory, indexName(record.backup_id)), indexText(record), { overwrite: true, mode: 0o600 });
}

/** Newest first. Reads only the small index files, never an archive, and needs no database. */
export async function listBackups(directory: string): Promise<BackupRecord[]> {
  let names: string[];
  try {
    names = await readdir(directory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const records: BackupRecord[] = [];
  for (const name of names) {
    const match = /^(.+)\.backup\.json$/.exec(name);
    if (!match || !BACKUP_ID.test(match[1]!)) continue;
    const record = await readIndex(directory, match[1]!);
    if (record) records.push(record);
  }
  return records.sort((a, b) => (a.backup_id < b.backup_id ? 1 : a.backup_id > b.backup_id ? -1 : 0));
}

/** The index of a backup whose archive is present with the size the index recorded. */
async function readIndex(directory: string, id: string): Promise<BackupRecord | undefined> {
  const found = await readIndexAndArchive(directory, id);
  return found && 'record' in found && found.archiveSize === found.record.size ? found.record : undefined;
}

/** An index is a few hundred bytes; a larger file is not one of ours, and is not read into memory. */
const INDEX_LIMIT = 64 * 1024;

/**
 * The index and the size of its archive, when both are regular files: a symbolic link in the
 * backup directory could point at any file the process can read (the database, a key file),
 * which would then be listed, and downloaded with a `backups` token.
 */
async function readIndexAndArchive(directory: string, id: string): Promise<{ record: BackupRecord; archiveSize: number } | { irregular: string } | undefined> {
  try {
    const index = await readSmallRegularFile(path.join(directory, indexName(id)), INDEX_LIMIT);
    if (!Buffer.isBuffer(index)) return 'irregular' in index ? { irregular: `${indexName(id)} is ${index.irregular}` } : undefined;
    const record = parseIndex(index.toString('utf8'), id);
    if (!record) return undefined;
    const archive = await lstat(path.join(directory, record.file));
    if (!archive.isFile()) return { irregular: `${record.file} is ${kindOf(archive)}` };
    return { record, archiveSize: archive.size };
  } catch {
    return undefined;
  }
}

/**
 * A backup named by its id (looked up in the directory, never used as a path) or by the
 * path of an archive file (for restoring on a new host from a copied file).
 */
export async function resolveBackup(directory: string, reference: string): Promise<{ file: string; record?: BackupRecord }> {
  if (BACKUP_ID.test(reference)) {
    const found = await readIndexAndArchive(directory, reference);
    if (!found) throw new LicenseServerError('BACKUP_NOT_FOUND', `no complete backup has the id ${reference}`);
    if ('irregular' in found) throw irregularBackup(reference, found.irregular);
    const { record, archiveSize } = found;
    if (archiveSize !== record.size) {
      throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: its archive has ${archiveSize} bytes, its index says ${record.size} (truncated or appended to)`);
    }
    return { file: path.join(directory, record.file), record };
  }
  if (/\.backup\.tar\.gz(\.enc)?$/.test(reference) || reference.includes(path.sep) || reference.includes('/')) {
    try {
      if ((await stat(reference)).isFile()) return { file: path.resolve(reference) };
    } catch {
      // fall through
    }
  }
  throw new LicenseServerError('BACKUP_NOT_FOUND', `no backup has the id or path ${JSON.stringify(reference.slice(0, 100))}`);
}

function irregularBackup(id: string, what: string): LicenseServerError {
  return new LicenseServerError('BACKUP_NOT_FOUND', `backup ${id} is not read: ${what}, not a regular file, and backups are read only from regular files in the backup directory`);
}

export interface OpenedArchive {
  readonly record: BackupRecord;
  /** Open on the archive itself, never through a link; the caller closes it (or hands it to a stream). */
  readonly handle: FileHandle;
  readonly size: number;
  /**
   * From the file's first bytes, not from its index: what the archive is, whatever its index
   * or name says, and the same for backups made by any release.
   */
  readonly encrypted: boolean;
}

/** A listed backup's archive opened for sending as it is (a download). */
export async function openArchive(directory: string, id: string): Promise<OpenedArchive> {
  const { file, record } = await resolveBackup(directory, id);
  const opened = await openRegularFile(file).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new LicenseServerError('BACKUP_NOT_FOUND', `no complete backup has the id ${id}`);
    throw error;
  });
  if ('irregular' in opened) throw irregularBackup(id, `${path.basename(file)} is ${opened.irregular}`);
  const { handle, stats } = opened;
  try {
    if (stats.size !== record!.size) {
      throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: its archive has ${stats.size} bytes, its index says ${record!.size} (truncated or appended to)`);
    }
    const first = Buffer.alloc(MAGIC.length);
    const { bytesRead } = await handle.read(first, 0, first.length, 0);
    return { record: record!, handle, size: stats.size, encrypted: sniff(first.subarray(0, bytesRead)) === 'encrypted' };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * The first step of pruning a backup: its index is renamed to `<id>.backup.pruned`, which
 * unlists it and marks its archive as doomed. A prune killed before it finished leaves the
 * mark, and the next lock holder finishes the prune (debris.ts) instead of taking the archive
 * for an interrupted create's. The caller fsyncs the directory.
 */
export async function unlistForPrune(directory: string, id: string): Promise<void> {
  try {
    await rename(path.join(directory, indexName(id)), path.join(directory, prunedMarkName(id)));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** The last step: the archive (either form), then the mark. */
export async function removePruned(directory: string, id: string): Promise<void> {
  for (const encrypted of [false, true]) await rm(path.join(directory, archiveName(id, encrypted)), { force: true });
  await rm(path.join(directory, prunedMarkName(id)), { force: true });
}

export function prunedMarkName(id: string): string {
  return `${id}.backup.pruned`;
}

/** What the directory holds besides listed backups, from its entries alone (debris.ts judges them). */
export async function unlistedFiles(directory: string): Promise<{ archives: string[]; prunedMarks: string[]; names: string[]; irregular: Array<{ name: string; kind: string }> }> {
  let entries;
  try {
    entries = await readdir(directory, { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { archives: [], prunedMarks: [], names: [], irregular: [] };
    throw error;
  }
  const names = entries.map((entry) => entry.name);
  const present = new Set(names);
  const archives: string[] = [];
  const prunedMarks: string[] = [];
  const irregular: Array<{ name: string; kind: string }> = [];
  for (const entry of entries) {
    const { name } = entry;
    const ours = /^(.+)\.backup\.(?:json|tar\.gz|tar\.gz\.enc|pruned)$/.exec(name);
    if (!ours || !BACKUP_ID.test(ours[1]!)) continue;
    // readdir's type is lstat's: a link is a link, whatever it points at.
    if (!entry.isFile()) {
      irregular.push({ name, kind: kindOf(entry) });
      continue;
    }
    const archive = /^(.+)\.backup\.tar\.gz(\.enc)?$/.exec(name);
    if (archive && !present.has(indexName(archive[1]!))) archives.push(name);
    const mark = /^(.+)\.backup\.pruned$/.exec(name);
    if (mark) prunedMarks.push(mark[1]!);
  }
  return { archives: archives.sort(), prunedMarks: prunedMarks.sort(), names, irregular: irregular.sort((a, b) => (a.name < b.name ? -1 : 1)) };
}
