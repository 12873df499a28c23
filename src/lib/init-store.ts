import { existsSync } from 'node:fs';
import path from 'node:path';
import { listAdminTokens } from './admin-tokens.js';
import type { OperationContext } from './context.js';
import { endorseKeys } from './signing-keys/endorsements.js';
import { ensureSigningKey } from './signing-keys/keys.js';
import { hasSchema, migrate } from './storage/migrations.js';
import { isPostgresUrl, openDatabase } from './storage/open.js';
import type { Engine } from './storage/types.js';
import type { PostgresTimeouts } from './storage/postgres-connection.js';

/** What `license-server init` found and did. */
export interface InitReport {
  readonly engine: Engine;
  /** The SQLite file, or the PostgreSQL URL with its password redacted. */
  readonly location: string;
  /** What this run created, in order; empty when the store was complete already. */
  readonly created: ReadonlyArray<'data_dir' | 'database' | 'schema' | 'signing_key'>;
  /** Set when an existing store of an older schema was brought up to date. */
  readonly migrated: { readonly from: number; readonly to: number } | null;
  readonly schema_version: number;
  readonly signing_key_fingerprint: string;
  /** Live admin tokens. init never creates one: `serve` prints a bootstrap token on its first start. */
  readonly admin_tokens: number;
}

/**
 * Creates whatever of a store is missing, and nothing else: the SQLite file (0600, in a
 * 0700 directory) or, on PostgreSQL, the schema in the existing database; the migrations;
 * the signing key. Run again, it finds everything there and changes nothing.
 */
export async function initStore(url: string, context: OperationContext, options: { keyEncryptionKey?: Uint8Array; timeouts?: PostgresTimeouts } = {}): Promise<InitReport> {
  const created: Array<InitReport['created'][number]> = [];
  if (!isPostgresUrl(url)) {
    if (!existsSync(path.dirname(url))) created.push('data_dir');
    if (!existsSync(url)) created.push('database');
  }
  const db = await openDatabase(url, { migrate: false, keyEncryptionKey: options.keyEncryptionKey, timeouts: options.timeouts });
  try {
    const hadSchema = await hasSchema(db);
    const { from, to } = await migrate(db);
    if (!hadSchema) created.push('schema');
    const key = await ensureSigningKey(db, context);
    if (key.created) created.push('signing_key');
    // A store migrated from before endorsements has its keys endorsed here (signing-keys/endorsements.ts).
    await endorseKeys(db, context);
    return {
      engine: db.engine,
      location: db.location,
      created,
      migrated: hadSchema && from !== to ? { from, to } : null,
      schema_version: to,
      signing_key_fingerprint: key.fingerprint,
      admin_tokens: (await listAdminTokens(db)).length,
    };
  } finally {
    await db.close();
  }
}
