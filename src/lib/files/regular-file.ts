import { constants, type Dirent, type Stats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';

/**
 * Files that license-server reads from a directory others may write to (the backup
 * directory) are read only when they are themselves regular files: never through a symbolic
 * link, which could point at any file the process can read, and never a FIFO or a device,
 * which could block a read forever or never end it.
 */
export type Irregular = { readonly irregular: string };

/** What a directory entry is, in words, when it is not a regular file. */
export function kindOf(entry: Stats | Dirent): string {
  if (entry.isSymbolicLink()) return 'a symbolic link';
  if (entry.isDirectory()) return 'a directory';
  if (entry.isFIFO()) return 'a FIFO';
  if (entry.isSocket()) return 'a socket';
  if (entry.isBlockDevice() || entry.isCharacterDevice()) return 'a device';
  return 'not a regular file';
}

/**
 * Opens `file` for reading when it is a regular file. lstat first, so that a device is never
 * even opened; then O_NOFOLLOW (a link swapped in after the check fails with ELOOP) and
 * O_NONBLOCK (a FIFO swapped in does not wait for a writer), and fstat of what was opened.
 * Absent files throw ENOENT as usual.
 */
export async function openRegularFile(file: string): Promise<{ handle: FileHandle; stats: Stats } | Irregular> {
  const before = await lstat(file);
  if (!before.isFile()) return { irregular: kindOf(before) };
  let handle: FileHandle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') return { irregular: 'a symbolic link' };
    throw error;
  }
  const stats = await handle.stat();
  if (!stats.isFile()) {
    await handle.close();
    return { irregular: kindOf(stats) };
  }
  return { handle, stats };
}

/**
 * A small regular file's bytes, read whole: at most `limit` bytes, or `{ tooLarge }` without
 * reading more than that.
 */
export async function readSmallRegularFile(file: string, limit: number): Promise<Buffer | Irregular | { readonly tooLarge: number }> {
  const opened = await openRegularFile(file);
  if ('irregular' in opened) return opened;
  const { handle, stats } = opened;
  try {
    if (stats.size > limit) return { tooLarge: stats.size };
    const buffer = Buffer.alloc(limit + 1);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      // Grown since fstat: still never more than the limit in memory.
      if (filled > limit) return { tooLarge: filled };
    }
    return buffer.subarray(0, filled);
  } finally {
    await handle.close();
  }
}
