import type { Database } from './types.js';
import { migrate } from './migrations.js';

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * Opens the database named by `database.url` and brings its schema up to date. The driver
 * of the other engine is never loaded: pg costs ~70 ms of start-up that a SQLite user
 * should not pay, and better-sqlite3 is a native module a PostgreSQL user may not need.
 */
export async function openDatabase(url: string, options: { migrate?: boolean; applicationName?: string } = {}): Promise<Database> {
  let db: Database;
  if (isPostgresUrl(url)) {
    const { PostgresDatabase } = await import('./postgres.js');
    db = await PostgresDatabase.open(url, options.applicationName);
  } else {
    const { SqliteDatabase } = await import('./sqlite.js');
    db = SqliteDatabase.open(url);
  }
  if (options.migrate !== false) {
    try {
      await migrate(db);
    } catch (error) {
      await db.close().catch(() => undefined);
      throw error;
    }
  }
  return db;
}
