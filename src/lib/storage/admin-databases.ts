import { forgetSigner } from '../signing-keys/signer.js';
import { useKeyEncryptionKey } from '../signing-keys/kek-registry.js';
import type { PostgresTimeouts } from './postgres-connection.js';
import type { Database } from './types.js';

/**
 * What the daemon's admin routes use instead of the database its clients use, so that no
 * admin request can stall a client's validation (issue 24, docs/configuration.md
 * "Admin requests beside clients"):
 * - SQLite: admin reads run on a reader thread with a connection of its own (sqlite-reader.ts);
 *   admin writes stay on the one main connection, as SQLite has one writer anyway.
 * - PostgreSQL: a small pool of its own, whose statements are cancelled after
 *   `database.admin_statement_timeout`: slow admin queries fill it, never the clients' pool.
 *
 * The background read of the store's figures for /metrics (metrics/store-figures-cache.ts)
 * counts the whole machines table: on SQLite it gets a reader thread of its own, at the lowest
 * priority and without the admin timeout, so that it neither waits behind admin reads nor makes
 * them wait (seconds at a million machines on a busy machine); on PostgreSQL it takes one
 * connection of the admin pool (well under a second there: the engine hash-joins).
 */
export interface AdminDatabases {
  /** For admin GET routes. */
  readonly reads: Database;
  /** For the admin routes that change something. */
  readonly writes: Database;
  /** For the background read of the store's figures. */
  readonly figures: Database;
  close(): Promise<void>;
}

export interface AdminDatabaseSettings {
  readonly url: string;
  readonly applicationName: string;
  readonly timeouts: PostgresTimeouts & { readonly adminStatementTimeout: number };
  readonly keyEncryptionKey?: Uint8Array;
}

/** Connections of the PostgreSQL admin pool: admin requests beyond it wait (database.connect_timeout). */
export const ADMIN_POOL_SIZE = 2;

/** The reader thread's nice value: below the main thread, which answers the clients. */
const READER_NICE = 10;

/** The figures' reader thread: below the admin reads too. */
const FIGURES_NICE = 19;

export async function openAdminDatabases(primary: Database, settings: AdminDatabaseSettings): Promise<AdminDatabases> {
  const timeoutSeconds = settings.timeouts.adminStatementTimeout;
  let admin: Database;
  let figures: Database | undefined;
  if (primary.engine === 'sqlite') {
    const { SqliteDatabase } = await import('./sqlite.js');
    if (!(primary instanceof SqliteDatabase)) return { reads: primary, writes: primary, figures: primary, close: async () => undefined };
    admin = primary.withOffloadedReads({ timeoutMs: timeoutSeconds * 1000, nice: READER_NICE });
    // No timeout: it only reads, on a thread nobody waits for; its age is a metric of its own.
    figures = primary.withOffloadedReads({ timeoutMs: 0, nice: FIGURES_NICE });
    // Its thread and connection now, before the daemon says it listens, not at the first read
    // just after: the threads and descriptors a daemon holds are settled once it serves.
    await figures.query('SELECT 1');
  } else {
    const { PostgresDatabase } = await import('./postgres.js');
    admin = await PostgresDatabase.open(settings.url, {
      applicationName: settings.applicationName,
      timeouts: { ...settings.timeouts, statementTimeout: timeoutSeconds, statementTimeoutSetting: 'database.admin_statement_timeout' },
      poolSize: ADMIN_POOL_SIZE,
    });
  }
  // Signing code finds the key-encryption key by the database it is handed.
  useKeyEncryptionKey(admin, settings.keyEncryptionKey);
  const writes = primary.engine === 'sqlite' ? primary : admin;
  return {
    reads: admin,
    writes,
    figures: figures ?? admin,
    async close() {
      forgetSigner(admin);
      await figures?.close();
      await admin.close();
    },
  };
}
