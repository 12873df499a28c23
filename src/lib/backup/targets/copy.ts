import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { LicenseServerError } from '../../errors.js';
import { syncDirectory } from '../../files/durable-write.js';
import { digestOf } from '../archive/archive.js';
import { MAGIC, sniff } from '../archive/encryption.js';
import { BACKUP_ID } from '../archive/manifest.js';
import { acquireBackupLock } from '../locks/lock.js';
import { planRetention, type RetentionPlan, type RetentionPolicy } from '../retention.js';
import { indexName, indexText, listBackups, parseIndex, writeIndex, type BackupRecord } from '../repository.js';
import { isTargetError, TargetError, type BackupTarget, type TargetFailure } from './target.js';

/**
 * A backup on a target is the same pair as in the backup directory: the archive, then its
 * index, written only once the archive has been read back from the target and its size and
 * whole-file SHA-256 match. So the target alone lists its backups (an index whose archive is
 * there with the index's size) and restores them, and an interrupted copy is never listed.
 */

/** What one copy to one target came to. */
export interface CopyOutcome {
  readonly target: string;
  readonly backup_id: string;
  /**
   * copied: now on the target, verified; present: it was already there, verified before;
   * busy: another process holds the copy's claim (replicate.ts).
   */
  readonly result: 'copied' | 'present' | 'failed' | 'refused-unencrypted' | 'busy';
  readonly reason?: TargetFailure | 'unencrypted';
  /** Why it failed, for the summary line and `backup status`: never a credential. */
  readonly error?: string;
  readonly bytes?: number;
  readonly seconds?: number;
  /** Backups the target's retention removed from it after this copy. */
  readonly pruned?: readonly string[];
}

export interface CopyOptions {
  readonly allowUnencrypted: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (bytes: number) => void;
}

/**
 * Copies the listed backup `record` from `directory` to `target` and checks it there. Never
 * throws for the target's failures: they are the outcome (the local backup stands whatever
 * happens here).
 */
export async function copyBackup(target: BackupTarget, directory: string, record: BackupRecord, options: CopyOptions): Promise<CopyOutcome> {
  const base = { target: target.name, backup_id: record.backup_id };
  if (!record.encrypted && !options.allowUnencrypted) {
    return {
      ...base,
      result: 'refused-unencrypted',
      reason: 'unencrypted',
      error: 'the backup is not encrypted (set backup.encryption_key, or allow_unencrypted: true on the target)',
    };
  }
  const started = performance.now();
  try {
    if (await holdsVerifiedIndex(target, record)) return { ...base, result: 'present' };
    // Whatever a killed attempt at this copy left: the caller holds its claim, so none is running.
    for (const key of [record.file, indexName(record.backup_id)]) await target.clearDebris(new Date(), key).catch(() => 0);
    const archive = path.join(directory, record.file);
    // 1 MiB reads: a target's writes cost less CPU in fewer, larger chunks (SFTP: about 15%).
    await target.put(record.file, () => createReadStream(archive, { highWaterMark: 1024 * 1024 }), record.size, {
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    const copied = await digestObject(target, record.file, options.signal);
    if (copied.size !== record.size || copied.sha256 !== record.sha256) {
      await target.delete(record.file).catch(() => undefined);
      throw new TargetError(target.name, 'protocol', `the copy of ${record.file} read back as ${copied.size} bytes with SHA-256 ${copied.sha256}, not ${record.size} bytes with ${record.sha256}; it was removed`);
    }
    const index = Buffer.from(indexText(record), 'utf8');
    await target.put(indexName(record.backup_id), () => Readable.from([index]), index.length, options.signal ? { signal: options.signal } : {});
    const readBack = await readSmall(target, indexName(record.backup_id));
    if (!readBack.equals(index)) {
      await target.delete(indexName(record.backup_id)).catch(() => undefined);
      throw new TargetError(target.name, 'protocol', `the index ${indexName(record.backup_id)} did not read back as written; it was removed`);
    }
    return { ...base, result: 'copied', bytes: record.size, seconds: (performance.now() - started) / 1000 };
  } catch (error) {
    return { ...base, result: 'failed', reason: isTargetError(error) ? error.reason : 'protocol', error: describeFailure(error) };
  }
}

/** What a target holds as backups: each index whose archive is there with the index's size. Newest first. */
export async function listTargetBackups(target: BackupTarget): Promise<BackupRecord[]> {
  const objects = await target.list();
  const sizes = new Map(objects.map((object) => [object.key, object.size]));
  const records: BackupRecord[] = [];
  for (const object of objects) {
    const match = /^(.+)\.backup\.json$/.exec(object.key);
    if (!match || !BACKUP_ID.test(match[1]!) || object.size > INDEX_LIMIT) continue;
    const record = parseIndex((await readSmall(target, object.key)).toString('utf8'), match[1]!);
    if (record && sizes.get(record.file) === record.size) records.push(record);
  }
  return records.sort((a, b) => (a.backup_id < b.backup_id ? 1 : a.backup_id > b.backup_id ? -1 : 0));
}

/** The listed backup `id` on the target, or BACKUP_NOT_FOUND. */
export async function findTargetBackup(target: BackupTarget, id: string): Promise<BackupRecord> {
  if (!BACKUP_ID.test(id)) throw new LicenseServerError('BACKUP_NOT_FOUND', `not a backup id: ${JSON.stringify(id.slice(0, 80))}`);
  const index = await target.stat(indexName(id));
  const record = index && index.size <= INDEX_LIMIT ? parseIndex((await readSmall(target, indexName(id))).toString('utf8'), id) : undefined;
  const archive = record && (await target.stat(record.file));
  if (!record || !archive || archive.size !== record.size) {
    throw new LicenseServerError('BACKUP_NOT_FOUND', `target ${target.name} holds no complete backup with the id ${id}`, {
      hint: `List what it holds with \`license-server backup list --target ${target.name}\`.`,
    });
  }
  return record;
}

/**
 * Downloads backup `id` from the target into `directory` as a listed local backup: the
 * archive under a temporary name, checked against the target's index (size and SHA-256),
 * renamed into place, then the index written: `backup validate --target` validates it there,
 * in a directory of its own. (A restore downloads with downloadBackup instead, into a staging
 * area, and lists the download only once it is restored: restore-source.ts.) It holds the directory's backup lock meanwhile, so its `.tmp-` file is cleared by the next
 * holder if it is killed. A backup already here with the same SHA-256 is not downloaded again.
 */
export async function fetchBackup(target: BackupTarget, id: string, directory: string, options: { signal?: AbortSignal; onProgress?: (bytes: number) => void } = {}): Promise<BackupRecord> {
  const record = await findTargetBackup(target, id);
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const release = await acquireBackupLock(directory, 'fetch');
  const temporary = path.join(directory, `.tmp-fetch-${Date.now()}-${randomBytes(4).toString('hex')}-${record.file}`);
  try {
    const local = (await listBackups(directory)).find((backup) => backup.backup_id === id);
    if (local && local.sha256 === record.sha256 && local.size === record.size) return local;
    const { size: bytes, sha256 } = await digestOf(
      await target.get(record.file, options.signal ? { signal: options.signal } : {}),
      createWriteStream(temporary, { flags: 'wx', mode: 0o600 }),
      options.onProgress,
    );
    if (bytes !== record.size || sha256 !== record.sha256) {
      throw new LicenseServerError('BACKUP_CORRUPT', `the copy of backup ${id} on target ${target.name} is damaged: ${bytes} bytes with SHA-256 ${sha256}, its index says ${record.size} bytes with ${record.sha256}`);
    }
    const handle = await open(temporary, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, path.join(directory, record.file));
    await syncDirectory(directory);
    await writeIndex(directory, record);
    return record;
  } finally {
    await rm(temporary, { force: true }).catch(() => undefined);
    await release();
  }
}

/** A backup downloaded from a target (downloadBackup): its archive, checked against the target's index. */
export interface DownloadedBackup {
  /** The target's index of it: its size and SHA-256 are the downloaded bytes'; the rest is what the target says. */
  readonly record: BackupRecord;
  readonly file: string;
  /** From the archive's first bytes, not from the target's index or the file name. */
  readonly encrypted: boolean;
}

/**
 * Downloads backup `id` from the target into `directory` (a staging area of the caller's,
 * which it removes), checked against the target's index: size and SHA-256. Nothing is listed:
 * the caller decides whether the download may become a local backup (restore-source.ts).
 */
export async function downloadBackup(target: BackupTarget, id: string, directory: string, options: { signal?: AbortSignal; onStart?: (record: BackupRecord) => void; onProgress?: (bytes: number) => void } = {}): Promise<DownloadedBackup> {
  const record = await findTargetBackup(target, id);
  options.onStart?.(record);
  const file = path.join(directory, record.file);
  const { size: bytes, sha256 } = await digestOf(
    await target.get(record.file, options.signal ? { signal: options.signal } : {}),
    createWriteStream(file, { flags: 'wx', mode: 0o600 }),
    options.onProgress,
  );
  if (bytes !== record.size || sha256 !== record.sha256) {
    throw new LicenseServerError('BACKUP_CORRUPT', `the copy of backup ${id} on target ${target.name} is damaged: ${bytes} bytes with SHA-256 ${sha256}, its index says ${record.size} bytes with ${record.sha256}`);
  }
  const handle = await open(file, 'r');
  try {
    await handle.sync();
    const first = Buffer.alloc(MAGIC.length);
    const { bytesRead } = await handle.read(first, 0, first.length, 0);
    return { record, file, encrypted: sniff(first.subarray(0, bytesRead)) === 'encrypted' };
  } finally {
    await handle.close();
  }
}

/** An index is a few hundred bytes; a larger object is not one of ours. */
const INDEX_LIMIT = 64 * 1024;

async function holdsVerifiedIndex(target: BackupTarget, record: BackupRecord): Promise<boolean> {
  const index = await target.stat(indexName(record.backup_id));
  if (!index || index.size > INDEX_LIMIT) return false;
  const copied = parseIndex((await readSmall(target, indexName(record.backup_id))).toString('utf8'), record.backup_id);
  if (!copied || copied.sha256 !== record.sha256 || copied.size !== record.size) return false;
  return (await target.stat(record.file))?.size === record.size;
}

async function readSmall(target: BackupTarget, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of await target.get(key)) {
    length += (chunk as Buffer).length;
    if (length > INDEX_LIMIT) throw new TargetError(target.name, 'protocol', `${key} is larger than an index can be`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

async function digestObject(target: BackupTarget, key: string, signal?: AbortSignal): Promise<{ size: number; sha256: string }> {
  return digestOf(await target.get(key, signal ? { signal } : {}));
}

function describeFailure(error: unknown): string {
  if (error instanceof LicenseServerError) return error.message;
  // Not one of ours: a bug, or a stream error without a code. Its message only, never a stack.
  return error instanceof Error ? error.message : String(error);
}

/**
 * The target's own retention: its keep rules (the local ones where it sets none) over what it
 * holds, the newest always kept (retention.ts). A backup goes index first, so that it is
 * unlisted before its archive goes; an archive left by a prune killed between the two is
 * debris like any other and goes with the next clearDebris. Never touches the local copies.
 */
export async function pruneTarget(target: BackupTarget, policy: RetentionPolicy, at: Date, options: { dryRun?: boolean } = {}): Promise<RetentionPlan> {
  const plan = planRetention(await listTargetBackups(target), policy, at);
  if (options.dryRun) return plan;
  for (const backup of plan.remove) {
    await target.delete(indexName(backup.backup_id));
    await target.delete(backup.file);
  }
  return plan;
}

/** Archives on the target without an index (an interrupted copy or prune), started before `before`: removed. */
export async function clearUnlistedArchives(target: BackupTarget, before: Date): Promise<number> {
  const objects = await target.list();
  const keys = new Set(objects.map((object) => object.key));
  let removed = 0;
  for (const object of objects) {
    const archive = /^(.+)\.backup\.tar\.gz(\.enc)?$/.exec(object.key);
    if (!archive || !BACKUP_ID.test(archive[1]!) || keys.has(indexName(archive[1]!)) || object.modified >= before) continue;
    await target.delete(object.key);
    removed += 1;
  }
  return removed;
}
