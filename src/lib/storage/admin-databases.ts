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
 */
export interface AdminDatabases {
  /** For admin GET routes. */
  readonly reads: Database;
  /** For the admin routes that change something. */
  readonly writes: Database;
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

export async function openAdminDatabases(primary: Database, settings: AdminDatabaseSettings): Promise<AdminDatabases> {
  const timeoutSeconds = settings.timeouts.adminStatementTimeout;
  let admin: Database;
  if (primary.engine === 'sqlite') {
    const { SqliteDatabase } = await import('./sqlite.js');
    if (!(primary instanceof SqliteDatabase)) return { reads: primary, writes: primary, close: async () => undefined };
    admin = primary.withOffloadedReads({ timeoutMs: timeoutSeconds * 1000, nice: READER_NICE });
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
    async close() {
      forgetSigner(admin);
      await admin.close();
    },
  };
}
