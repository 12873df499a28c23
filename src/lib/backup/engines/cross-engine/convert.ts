import path from 'node:path';
import type { Engine } from '../../../storage/types.js';
import { buildSqliteFromPostgresDump } from './postgres-to-sqlite.js';
import { writePostgresDumpOfSqlite, type ConvertedTables } from './sqlite-to-postgres.js';

/**
 * A backup's database entry as the other engine's: a SQLite file becomes a PostgreSQL dump
 * that restorePostgres loads; a PostgreSQL dump becomes a SQLite file that swapSqlite
 * renames into place. Written into the restore's staging directory.
 */
export async function convertForEngine(from: Engine, entry: string, staging: string): Promise<{ converted: ConvertedTables; file: string }> {
  if (from === 'sqlite') {
    const file = path.join(staging, 'converted-postgres.sql');
    return { converted: await writePostgresDumpOfSqlite(entry, file), file };
  }
  const file = path.join(staging, 'converted-sqlite.db');
  return { converted: await buildSqliteFromPostgresDump(entry, file), file };
}
