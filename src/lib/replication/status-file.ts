import { readFile, rename, writeFile } from 'node:fs/promises';
import type { ReplicationStatus } from './replicator.js';

/**
 * What serve last knew of its replication, as the command line reads it: `backup status`
 * runs without the daemon, and Litestream's own files say where the local shadow WAL is but
 * not whether a replica has it.
 */
export interface RecordedReplicationStatus extends ReplicationStatus {
  /** When serve wrote it: it is rewritten about every second while serve runs. */
  readonly as_of: string;
  readonly serve_pid: number;
}

/** Beside the database and Litestream's configuration (`<database>.litestream.yml`). */
export function replicationStatusPath(databasePath: string): string {
  return `${databasePath}.replication.json`;
}

/**
 * Replaces the file whole (a reader never sees half of one), without fsync: it is a view,
 * rewritten a second later, and a crash that loses it loses nothing the next write does not
 * give back.
 */
export async function writeReplicationStatus(databasePath: string, status: ReplicationStatus, serve: { readonly pid: number; readonly at: Date }): Promise<void> {
  const file = replicationStatusPath(databasePath);
  const recorded: RecordedReplicationStatus = { ...status, as_of: serve.at.toISOString(), serve_pid: serve.pid };
  const partial = `${file}.${process.pid}.tmp`;
  await writeFile(partial, `${JSON.stringify(recorded)}\n`, { mode: 0o600 });
  await rename(partial, file);
}

/** Undefined when serve never replicated this database (or the file is not serve's). */
export async function readReplicationStatus(databasePath: string): Promise<RecordedReplicationStatus | undefined> {
  const text = await readFile(replicationStatusPath(databasePath), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    const parsed = JSON.parse(text) as Partial<RecordedReplicationStatus>;
    if (typeof parsed.as_of !== 'string' || typeof parsed.serve_pid !== 'number' || !Array.isArray(parsed.replicas)) return undefined;
    return parsed as RecordedReplicationStatus;
  } catch {
    return undefined;
  }
}
