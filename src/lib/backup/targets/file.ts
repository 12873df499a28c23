import { createWriteStream } from 'node:fs';
import { open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import { syncDirectory } from '../../files/durable-write.js';
import { describeFsError } from '../../fs-errors.js';
import { ExactSize } from './exact-size.js';
import { TargetError, type BackupTarget, type PutOptions, type StoredObject, type TargetFailure } from './target.js';

export interface FileTargetOptions {
  readonly name: string;
  /** An absolute directory, usually a mount point (a NAS). It must exist: it is never created. */
  readonly directory: string;
}

/** Uploads in progress are written as `.tmp-<start ms>-<random>-<key>`, then renamed. */
const TEMPORARY = /^\.tmp-(\d+)-[0-9a-f]{8}-/;

/**
 * A mounted directory. The one rule beyond the contract: the directory must already be
 * there. An unmounted NAS leaves an empty mount point or none; creating the path would fill
 * the host's own disk with what was meant to leave it, so a missing directory is 'missing'.
 */
export function openFileTarget(options: FileTargetOptions): BackupTarget {
  const { name, directory } = options;
  const fail = (error: unknown, doing: string): never => {
    if (error instanceof TargetError) throw error;
    throw new TargetError(name, failureOf(error), `${doing}: ${describeFsError(error)}`, { cause: error });
  };
  const pathOf = (key: string) => path.join(directory, checkedKey(name, key));
  const ensureDirectory = async () => {
    const info = await stat(directory).catch((error: unknown) => fail(error, `cannot use ${directory}`));
    if (!info.isDirectory()) throw new TargetError(name, 'missing', `${directory} is not a directory`);
  };

  return {
    name,
    kind: 'file',
    location: `file://${directory}`,
    check: ensureDirectory,

    async put(key: string, body: () => Readable, size: number, putOptions: PutOptions = {}): Promise<void> {
      const final = pathOf(key);
      await ensureDirectory();
      const temporary = path.join(directory, `.tmp-${Date.now()}-${randomBytes(4).toString('hex')}-${key}`);
      try {
        await pipeline(body(), new ExactSize(size, putOptions.onProgress), createWriteStream(temporary, { flags: 'wx', mode: 0o600 }), {
          ...(putOptions.signal ? { signal: putOptions.signal } : {}),
        });
        const handle = await open(temporary, 'r');
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
        await rename(temporary, final);
        await syncDirectory(directory);
      } catch (error) {
        await rm(temporary, { force: true }).catch(() => undefined);
        // Not the directory's failure: the body ended early or ran long, failed, or was aborted.
        if (!/^E[A-Z]+$/.test((error as { code?: string }).code ?? '')) {
          throw new TargetError(name, 'protocol', `upload of ${key} failed: ${(error as Error).message}`, { cause: error });
        }
        fail(error, `cannot write ${key}`);
      }
    },

    async get(key: string): Promise<Readable> {
      const file = pathOf(key);
      // Opened before it is handed over, so that a missing file fails here, not mid-stream.
      const handle = await open(file, 'r').catch((error: unknown) => fail(error, `cannot read ${key}`));
      return handle.createReadStream();
    },

    async stat(key: string): Promise<StoredObject | undefined> {
      try {
        const info = await stat(pathOf(key));
        return info.isFile() ? { key, size: info.size, modified: info.mtime } : undefined;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        return fail(error, `cannot read ${key}`);
      }
    },

    async list(prefix = ''): Promise<StoredObject[]> {
      await ensureDirectory();
      const entries = await readdir(directory, { withFileTypes: true }).catch((error: unknown) => fail(error, `cannot list ${directory}`));
      const objects: StoredObject[] = [];
      for (const entry of entries) {
        if (!entry.isFile() || entry.name.startsWith('.tmp-') || !entry.name.startsWith(prefix)) continue;
        const info = await stat(path.join(directory, entry.name)).catch(() => undefined);
        if (info?.isFile()) objects.push({ key: entry.name, size: info.size, modified: info.mtime });
      }
      return objects;
    },

    async delete(key: string): Promise<void> {
      await rm(pathOf(key), { force: true }).catch((error: unknown) => fail(error, `cannot remove ${key}`));
    },

    async clearDebris(startedBefore: Date, key?: string): Promise<number> {
      await ensureDirectory();
      let removed = 0;
      for (const entry of await readdir(directory)) {
        const started = TEMPORARY.exec(entry);
        if (!started || Number(started[1]) >= startedBefore.getTime()) continue;
        if (key !== undefined && entry.slice(started[0].length) !== key) continue;
        await rm(path.join(directory, entry), { force: true }).catch((error: unknown) => fail(error, `cannot remove ${entry}`));
        removed += 1;
      }
      return removed;
    },

    async close(): Promise<void> {},
  };
}

/** Keys are plain names: a slash or a leading dot could reach outside the target or hide as debris. */
export function checkedKey(target: string, key: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(key)) throw new TargetError(target, 'protocol', `not a key a target holds: ${JSON.stringify(key.slice(0, 80))}`);
  return key;
}

function failureOf(error: unknown): TargetFailure {
  switch ((error as NodeJS.ErrnoException).code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return 'missing';
    case 'ENOSPC':
    case 'EDQUOT':
    case 'EFBIG':
      return 'full';
    case 'EACCES':
    case 'EPERM':
      return 'auth';
    default:
      return 'unreachable';
  }
}
