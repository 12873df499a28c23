import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { Database } from '../lib/storage/types.js';

/**
 * The configured store, which must exist: a missing SQLite file or a PostgreSQL database
 * without the schema is DATABASE_NOT_FOUND, naming the path and where it came from. Only
 * `serve` and `init` create a store.
 */
export async function openExistingStore(config: ResolvedConfig): Promise<Database> {
  const [{ openDatabase }, { describeDatabaseOrigin }] = await Promise.all([import('../lib/storage/open.js'), import('../lib/config/resolve.js')]);
  return openDatabase(config.settings.database.url, {
    create: false,
    origin: describeDatabaseOrigin(config),
    keyEncryptionKey: config.settings.signing.keyEncryptionKey,
    timeouts: config.settings.database,
  });
}
