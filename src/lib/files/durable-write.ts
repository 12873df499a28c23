import { constants, createWriteStream } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { LicenseServerError } from '../errors.js';
import { describeFsError } from '../fs-errors.js';

export interface DurableWriteOptions {
  /** Replace an existing file; without it an existing file is FILE_EXISTS and stays untouched. */
  readonly overwrite?: boolean;
  readonly mode?: number;
}

/**
 * Writes `data` so that `target` is either absent, the old file, or the complete new one,
 * and is on the device when this returns (conventions section 6): write `target.partial`,
 * fsync it, rename it over `target`, fsync the directory. On failure the partial file is
 * removed. Hard links would make "no overwrite" atomic, but FAT-formatted USB sticks, where
 * air-gapped staff write license files, have none; the existence check is the next best.
 */
export async function writeFileDurably(target: string, data: string | Uint8Array, options: DurableWriteOptions = {}): Promise<void> {
  const partial = `${target}.partial`;
  const failed = (error: unknown): never => {
    throw new LicenseServerError('FILE_WRITE_FAILED', `cannot write ${target}: ${describeFsError(error)}`, { cause: error });
  };
  const refuseExisting = async () => {
    if (!options.overwrite && (await exists(target))) throw new LicenseServerError('FILE_EXISTS', `${target} already exists`);
  };
  try {
    await refuseExisting();
    const handle = await open(partial, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, options.mode ?? 0o644);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await refuseExisting();
    await rename(partial, target);
    await syncDirectory(path.dirname(target));
  } catch (error) {
    await rm(partial, { force: true }).catch(() => undefined);
    if (error instanceof LicenseServerError) throw error;
    failed(error);
  }
}

/**
 * The same guarantees as writeFileDurably for content that arrives as a stream (a backup
 * being decrypted): `target` appears only once every byte has arrived and is on the device.
 * An error of the source or a stage (a chunk that fails to authenticate) is passed on as it
 * is, after the partial file is removed; an error writing is FILE_WRITE_FAILED.
 */
export async function writeStreamDurably(target: string, source: Readable, stages: readonly Transform[], options: DurableWriteOptions = {}): Promise<void> {
  const partial = `${target}.partial`;
  if (!options.overwrite && (await exists(target))) throw new LicenseServerError('FILE_EXISTS', `${target} already exists`);
  const sink = createWriteStream(partial, { mode: options.mode ?? 0o644 });
  let readError: unknown;
  source.once('error', (error) => (readError = error));
  try {
    await pipeline([source, ...stages, sink]);
    await syncFile(partial);
    if (!options.overwrite && (await exists(target))) throw new LicenseServerError('FILE_EXISTS', `${target} already exists`);
    await rename(partial, target);
    await syncDirectory(path.dirname(target));
  } catch (error) {
    await rm(partial, { force: true }).catch(() => undefined);
    if (error === readError || error instanceof LicenseServerError) throw error;
    throw new LicenseServerError('FILE_WRITE_FAILED', `cannot write ${target}: ${describeFsError(error)}`, { cause: error });
  }
}

/** Flushes a file that was written through a stream to the device. */
export async function syncFile(file: string): Promise<void> {
  const handle = await open(file, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** fsync of a directory makes a rename in it durable; some file systems refuse it harmlessly. */
export async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, constants.O_RDONLY);
  try {
    await handle.sync();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EPERM' && code !== 'ENOTSUP') throw error;
  } finally {
    await handle.close();
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}
