import { LicenseServerError } from '../errors.js';
import { existsSync } from 'node:fs';
import type { StorageObserver } from './observer.js';
import type { Database } from './types.js';
import { storeAccessDenied } from './file-access.js';
import type { PostgresTimeouts } from './postgres-connection.js';
import { hasSchema, migrate } from './migrations.js';
import { useKeyEncryptionKey } from '../signing-keys/kek-registry.js';

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

export interface OpenOptions {
  /** Bring the schema up to date (default true). */
  readonly migrate?: boolean;
  readonly applicationName?: string;
  /** PostgreSQL: the database.*_timeout settings (seconds); their defaults when absent. */
  readonly timeouts?: PostgresTimeouts;
  /**
   * Create the store when there is none: a missing SQLite file (0600, in a 0700 directory),
   * or a PostgreSQL database without the license-server schema. Default true; the CLI passes
   * false for every command but `serve` and `init`, so that a command run from the wrong
   * directory fails with DATABASE_NOT_FOUND instead of starting an empty store there.
   */
  readonly create?: boolean;
  /** Where database.url came from, for the DATABASE_NOT_FOUND message (e.g. "env LICENSE_DATA_DIR"). */
  readonly origin?: string;
  /** SQLite: the daemon's connection, which gets a bigger page cache (sqlite.ts, useServingCache). */
  readonly serving?: boolean;
  /**
   * SQLite: Litestream replicates the file and owns its checkpoints, so this connection makes
   * none (wal_autocheckpoint = 0). A checkpoint of ours while Litestream is down would move
   * WAL frames into the file before it copied them (Litestream #752).
   */
  readonly checkpointsByLitestream?: boolean;
  /** Setting signing.key_encryption_key: opens sealed signing keys (signing-keys/protection.ts). */
  readonly keyEncryptionKey?: Uint8Array;
  /** Told of what storage does that the daemon counts (observer.ts). */
  readonly observer?: StorageObserver;
}

/**
 * Opens the database named by `database.url` and brings its schema up to date. The driver
 * of the other engine is never loaded: pg costs ~70 ms of start-up that a SQLite user
 * should not pay, and better-sqlite3 is a native module a PostgreSQL user may not need.
 */
export async function openDatabase(url: string, options: OpenOptions = {}): Promise<Database> {
  const create = options.create !== false;
  let db: Database;
  if (isPostgresUrl(url)) {
    const { PostgresDatabase } = await import('./postgres.js');
    db = await PostgresDatabase.open(url, { applicationName: options.applicationName, timeouts: options.timeouts });
  } else {
    // A file that another user's directory hides is not missing: say whose it is.
    if (!create && !existsSync(url)) throw storeAccessDenied(url, { create: false, what: 'the SQLite database' }) ?? notFound(`no license-server database exists at ${url}`, options.origin);
    const { SqliteDatabase } = await import('./sqlite.js');
    db = SqliteDatabase.open(url, { create, serving: options.serving === true, checkpointsByLitestream: options.checkpointsByLitestream === true, observer: options.observer });
  }
  try {
    if (!create && !(await hasSchema(db))) {
      throw notFound(
        db.engine === 'postgres'
          ? `the PostgreSQL database ${db.location} has no license-server schema yet`
          : `${db.location} is not a license-server database (it has no license-server schema)`,
        options.origin,
      );
    }
    if (options.migrate !== false) await migrate(db);
    useKeyEncryptionKey(db, options.keyEncryptionKey);
  } catch (error) {
    await db.close().catch(() => undefined);
    throw error;
  }
  return db;
}

function notFound(message: string, origin: string | undefined): LicenseServerError {
  return new LicenseServerError('DATABASE_NOT_FOUND', origin ? `${message} (${origin})` : message);
}
