import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';

/** A place in Litestream's shadow WAL: its generation, the WAL file's index, the byte offset in it. */
export interface WalPosition {
  readonly generation: string;
  readonly index: number;
  readonly offset: number;
}

/**
 * How far the local database has been copied into Litestream's shadow WAL (`.<name>-litestream/`
 * beside it): the current generation and the end of its newest WAL file. Undefined before
 * Litestream has made a generation.
 */
export async function localPosition(databasePath: string): Promise<WalPosition | undefined> {
  const meta = path.join(path.dirname(databasePath), `.${path.basename(databasePath)}-litestream`);
  const generation = (await readFile(path.join(meta, 'generation'), 'utf8').catch(() => '')).trim();
  if (!/^[0-9a-f]{16}$/.test(generation)) return undefined;
  const walDirectory = path.join(meta, 'generations', generation, 'wal');
  const files = (await readdir(walDirectory).catch(() => [] as string[])).filter((name) => /^[0-9a-f]{8}\.wal$/.test(name)).sort();
  const newest = files.at(-1);
  if (!newest) return undefined;
  const size = await stat(path.join(walDirectory, newest)).then((info) => info.size, () => undefined);
  return size === undefined ? undefined : { generation, index: Number.parseInt(newest.slice(0, 8), 16), offset: size };
}

/** What serve takes from one line of Litestream's JSON log (logging.type: json). */
export type LitestreamLogEvent =
  | { readonly kind: 'written'; readonly replica: string; readonly position: WalPosition }
  | { readonly kind: 'replica-found'; readonly replica: string; readonly position: WalPosition }
  | { readonly kind: 'database-synced' }
  | { readonly kind: 'uploading'; readonly replica: string }
  | { readonly kind: 'error'; readonly replica: string | undefined; readonly message: string }
  | { readonly kind: 'other'; readonly level: string; readonly message: string };

/**
 * Reads one log line (Litestream 0.3 at logging.level debug):
 * - "wal segment written" names where the segment began and its size, so its end is the
 *   replica's position: Litestream writes a segment within one WAL file;
 * - "replica sync: calc new pos" is where Litestream found the replica when it began (again)
 *   with a generation, at every start among others: the replica's position read from the target;
 * - "sync: ok" ends a copy of the database's WAL into the shadow WAL: the local position is
 *   current as of that moment;
 * - "write wal segment" and "write snapshot" begin an upload, which "... written" or an error
 *   ends (or nothing: see replicator.ts, hung uploads).
 * Undefined for a line that is not Litestream's JSON.
 */
export function readLogLine(line: string): LitestreamLogEvent | undefined {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof entry !== 'object' || entry === null) return undefined;
  const fields = entry as Record<string, unknown>;
  const message = typeof fields.msg === 'string' ? fields.msg : '';
  const level = typeof fields.level === 'string' ? fields.level : '';
  const replica = typeof fields.replica === 'string' ? fields.replica : undefined;
  if (message === 'wal segment written' && replica !== undefined && typeof fields.position === 'string' && typeof fields.sz === 'number') {
    const start = parsePosition(fields.position);
    if (start) return { kind: 'written', replica, position: { ...start, offset: start.offset + fields.sz } };
  }
  if (message === 'replica sync: calc new pos' && replica !== undefined && typeof fields.position === 'string') {
    const position = parsePosition(fields.position);
    if (position) return { kind: 'replica-found', replica, position };
  }
  if (message === 'sync: ok') return { kind: 'database-synced' };
  if ((message === 'write wal segment' || message === 'write snapshot') && replica !== undefined) return { kind: 'uploading', replica };
  if (level === 'ERROR') {
    const error = typeof fields.error === 'string' ? fields.error : '';
    return { kind: 'error', replica, message: `${message}${error ? `: ${error}` : ''}`.slice(0, 500) };
  }
  return { kind: 'other', level, message };
}

/** `d998cca53990428e/00000000:16512`, as Litestream writes a position. */
export function parsePosition(text: string): WalPosition | undefined {
  const match = /^([0-9a-f]{16})\/([0-9a-f]{8}):(\d+)$/.exec(text);
  return match ? { generation: match[1]!, index: Number.parseInt(match[2]!, 16), offset: Number(match[3]) } : undefined;
}

/** Whether a replica at `replica` holds everything up to `local`. */
export function holds(replica: WalPosition, local: WalPosition): boolean {
  return replica.generation === local.generation && (replica.index > local.index || (replica.index === local.index && replica.offset >= local.offset));
}
