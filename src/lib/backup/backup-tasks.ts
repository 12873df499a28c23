import type { ArchiveEntry, FileDigest } from './archive/archive.js';

/**
 * What a backup worker thread runs (in-worker.ts): the byte-heavy steps of `backup create`.
 * Arguments arrive structured-cloned, Buffers as plain Uint8Arrays: they are made Buffers
 * again here.
 */
export const BACKUP_TASKS = {
  async dumpPostgres(url: string, directory: string) {
    const { dumpPostgres } = await import('./engines/postgres-dump.js');
    return dumpPostgres(url, directory);
  },
  async writeArchive(target: string, entries: ArchiveEntry[], key: Uint8Array | undefined, onProgress: (bytes: number) => void) {
    const { writeArchive } = await import('./archive/archive.js');
    return writeArchive(target, entries.map((entry) => (entry.data ? { ...entry, data: asBuffer(entry.data) } : entry)), { key: key && asBuffer(key), onProgress });
  },
  async verifyWritten(file: string, key: Uint8Array | undefined, members: readonly number[], onProgress: (bytes: number) => void): Promise<FileDigest> {
    const { verifyArchive } = await import('./archive/verify.js');
    return (await verifyArchive(file, { key: key && asBuffer(key), onProgress, hashFile: true, members })).digest;
  },
};

export type BackupTasks = typeof BACKUP_TASKS;

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
