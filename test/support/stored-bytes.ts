import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Engine } from '../../src/lib/storage/types.js';
import { onDatabase } from './postgres.js';

/**
 * Every byte a database keeps on disk for signing_keys, to search for private key seeds: the
 * SQLite file and its WAL; or the PostgreSQL table's heap, both every block as the server sees
 * it (pageinspect reads through the buffer cache) and its relation files as written (after a
 * CHECKPOINT), including the files it had before (`before`, from relationFiles), which a table
 * rewrite leaves truncated. The tests run as root, so they may read the data directory.
 */
export async function storedBytes(engine: Engine, url: string, before: readonly string[] = []): Promise<Buffer[]> {
  if (engine === 'sqlite') return [url, `${url}-wal`].filter(existsSync).map((file) => readFileSync(file));
  return onDatabase(url, async (client) => {
    const chunks: Buffer[] = [];
    await client.query('CREATE EXTENSION IF NOT EXISTS pageinspect');
    const { blocks } = (await client.query<{ blocks: number }>("SELECT (pg_relation_size('signing_keys') / current_setting('block_size')::int)::int AS blocks")).rows[0]!;
    for (let block = 0; block < blocks; block += 1) {
      chunks.push((await client.query<{ page: Buffer }>('SELECT get_raw_page($1, $2) AS page', ['signing_keys', block])).rows[0]!.page);
    }
    await client.query('CHECKPOINT');
    for (const file of new Set([...before, ...(await relationFiles(engine, url))])) if (existsSync(file)) chunks.push(readFileSync(file));
    return chunks;
  });
}

/** The main-fork files (every 1 GB segment) of signing_keys under the server's data directory; none for SQLite. */
export async function relationFiles(engine: Engine, url: string): Promise<string[]> {
  if (engine === 'sqlite') return [];
  return onDatabase(url, async (client) => {
    const { dir, rel } = (await client.query<{ dir: string; rel: string }>("SELECT current_setting('data_directory') AS dir, pg_relation_filepath('signing_keys') AS rel")).rows[0]!;
    const main = path.join(dir, rel);
    return readdirSync(path.dirname(main))
      .filter((name) => name === path.basename(main) || name.startsWith(`${path.basename(main)}.`))
      .map((name) => path.join(path.dirname(main), name));
  });
}

export function holdsSeed(chunks: readonly Buffer[], seed: Buffer): boolean {
  return chunks.some((chunk) => chunk.includes(seed));
}
