import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

const require = createRequire(import.meta.url);

/**
 * The better-sqlite3 build this Node.js can run. better-sqlite3 13 ships Node-API 10
 * binaries inside its package (no compiler, the same file for Node 22 and 24), but Node 20
 * has only Node-API 9 and crashes loading them; better-sqlite3 12 is a classic addon that
 * Node 24 aborts at exit (`(env) != nullptr` in RemoveEnvironmentCleanupHook, raised from
 * its ObjectWrap destructors). So Node 20 gets 12, compiled at install by
 * scripts/native-driver.mjs under the alias better-sqlite3-node20, and every newer Node
 * gets 13. Both have the same JavaScript API.
 */
export const SQLITE_DRIVER: string = Number(process.versions.napi) >= 10 ? 'better-sqlite3' : 'better-sqlite3-node20';

/** The driver's entry file, for worker threads that `require` it themselves. */
export function sqliteDriverPath(): string {
  return require.resolve(SQLITE_DRIVER);
}

/** Loads the driver (synchronously: better-sqlite3 is a CommonJS module). */
export function loadSqliteDriver(): typeof BetterSqlite3 {
  return require(SQLITE_DRIVER) as typeof BetterSqlite3;
}
