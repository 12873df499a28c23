import { mkdir, mkdtemp, rename, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedConfig } from '../config/resolve.js';
import { LicenseServerError } from '../errors.js';
import { syncDirectory } from '../files/durable-write.js';
import { asWriteFailure } from '../fs-errors.js';
import type { Manifest } from './archive/manifest.js';
import { ownedWorkPrefix } from './locks/work-owner.js';
import { archiveName, listBackups, recordFrom, resolveBackup, writeIndex, type BackupRecord } from './repository.js';

/**
 * Where a restore, or its dry run, reads its archive: a backup of the backup directory (by
 * id), a file named by path, or a backup on an off-site target. A target's is downloaded into
 * a staging area of its own under the backup directory (`.restore-<host>-<pid>-*`, which the
 * next create, prune or validate removes if this process dies), never beside the listed
 * backups: until the restore has succeeded it is only bytes someone put on the target.
 */
export interface RestoreSource {
  readonly file: string;
  /** The backup's index (the target's, for a download); undefined for a file named by path. */
  readonly record?: BackupRecord;
  /** The target it was downloaded from, or undefined for a local archive. */
  readonly target?: string;
  /**
   * After a successful restore: lists a download in the backup directory, its index written
   * from the verified manifest rather than the target's index, unless a backup of that id is
   * listed here already. The caller holds the directory's backup lock. Nothing for a local archive.
   */
  promote(verified: { readonly manifest: Manifest; readonly encrypted: boolean }, at: Date): Promise<void>;
  /** Removes the staging area (and a backup directory made only for it); safe to call twice. */
  dispose(): Promise<void>;
}

export interface RestoreSourceOptions {
  readonly config: ResolvedConfig;
  /** A backup id, or (without `target`) the path of an archive file. */
  readonly reference: string;
  /** The backup directory (backup.path unless given). */
  readonly directory: string;
  /** A name under backup.targets: the backup is downloaded from there. */
  readonly target?: string;
  /** Called once the target's index is read, before its archive is downloaded. */
  readonly onDownload?: (size: number) => void;
  readonly onProgress?: (bytes: number) => void;
  readonly signal?: AbortSignal;
}

export async function openRestoreSource(options: RestoreSourceOptions): Promise<RestoreSource> {
  const directory = path.resolve(options.directory);
  if (options.target === undefined) {
    const { file, record } = await resolveBackup(directory, options.reference);
    return { file, ...(record ? { record } : {}), promote: async () => undefined, dispose: async () => undefined };
  }
  const [{ downloadBackup }, { openTarget, selectTargets }] = await Promise.all([import('./targets/copy.js'), import('./targets/open.js')]);
  const [settings] = selectTargets(options.config.settings.backup.targets, [options.target]);
  const made = await mkdir(directory, { recursive: true, mode: 0o700 }).catch((error: unknown) => {
    throw asWriteFailure(error, `cannot create the backup directory ${directory}`);
  });
  let staging: string | undefined;
  const dispose = async () => {
    if (staging) await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    if (made) await removeEmptyDirectories(directory, made);
  };
  try {
    staging = await mkdtemp(path.join(directory, ownedWorkPrefix('restore'))).catch((error: unknown) => {
      throw asWriteFailure(error, `cannot write the download into ${directory}`);
    });
    const target = await openTarget(settings!, options.config.env);
    let downloaded;
    try {
      downloaded = await downloadBackup(target, options.reference, staging, {
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.onDownload ? { onStart: (record: BackupRecord) => options.onDownload!(record.size) } : {}),
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      });
    } finally {
      await target.close().catch(() => undefined);
    }
    // An unencrypted archive proves nothing about who made it: anyone who can write to the
    // target could have put it there, with their own admin tokens and signing keys. The
    // setting that lets unencrypted backups go to a target is the one that lets them come back.
    if (!downloaded.encrypted && !settings!.allowUnencrypted) {
      throw new LicenseServerError(
        'BACKUP_UNENCRYPTED_REFUSED',
        `backup ${downloaded.record.backup_id} on target ${settings!.name} is not encrypted, and the target does not say allow_unencrypted: true: whoever can write to the target could have put it there; nothing was restored`,
      );
    }
    const { record, file } = downloaded;
    return {
      file,
      record,
      target: settings!.name,
      promote: async (verified, at) => {
        if ((await listBackups(directory)).some((backup) => backup.backup_id === verified.manifest.backup_id)) return;
        const name = archiveName(verified.manifest.backup_id, verified.encrypted);
        await rename(file, path.join(directory, name));
        await syncDirectory(directory);
        await writeIndex(directory, recordFrom(verified.manifest, { name, size: record.size, sha256: record.sha256 }, verified.encrypted, at));
      },
      dispose,
    };
  } catch (error) {
    await dispose();
    throw error;
  }
}

/**
 * Removes `deepest` and its parents up to `first` (a directory this process made with
 * `mkdir -p`) while they are empty: a refused restore on a new host leaves no directory behind,
 * and never removes one that holds anything.
 */
export async function removeEmptyDirectories(deepest: string, first: string): Promise<void> {
  for (let directory = path.resolve(deepest); ; directory = path.dirname(directory)) {
    try {
      await rmdir(directory);
    } catch {
      return;
    }
    if (directory === path.resolve(first) || path.dirname(directory) === directory) return;
  }
}
