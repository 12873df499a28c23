import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createApp } from '../../src/http/app.js';
import { bulkSelection } from '../../src/http/bulk-selection.js';
import { listen } from '../../src/http/server.js';
import { ServingState } from '../../src/http/serving-state.js';
import { BulkRunner, type BulkRunnerOptions } from '../../src/lib/bulk/runner.js';
import { resolveConfig } from '../../src/lib/config/resolve.js';
import { ensureSigningKey } from '../../src/lib/signing-keys/keys.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database } from '../../src/lib/storage/types.js';

/** The admin token every in-process daemon accepts (LICENSE_ADMIN_TOKEN). */
export const IN_PROCESS_ADMIN_TOKEN = 'in-process-admin-token-0123456789';

export interface InProcessDaemon {
  readonly url: string;
  /** The daemon's own connection (pool) to the database, as `serve` holds one. */
  readonly db: Database;
  /** Its runner of bulk jobs, as `serve` runs one. */
  readonly bulk: BulkRunner;
  stop(): Promise<void>;
}

/**
 * The daemon's app and listener, as `serve` builds them, in this process and on a clock the
 * test moves: time-dependent behaviour (leases, bookkeeping once a minute) is tested without
 * waiting for it. Each daemon opens its own connections, so two of them on one database
 * race in the database as two `serve` processes do. No daemon lock, scheduler or webhooks.
 * `bulk` sets the runner of bulk jobs apart from its database, clock and parser.
 */
export async function startInProcessDaemon(
  databaseUrl: string,
  clock: () => Date,
  options: { bulk?: Omit<BulkRunnerOptions, 'database' | 'select' | 'clock'> } = {},
): Promise<InProcessDaemon> {
  const cwd = mkdtempSync(path.join(tmpdir(), 'license-in-process-'));
  const config = await resolveConfig({
    env: { LICENSE_DATABASE_URL: databaseUrl, LICENSE_CLIENT_RATE_LIMIT: '0', LICENSE_ADMIN_TOKEN: IN_PROCESS_ADMIN_TOKEN },
    cwd,
  });
  const db = await openDatabase(databaseUrl);
  await ensureSigningKey(db, { actor: 'serve', clock });
  const state = new ServingState(db, config, (current) => openDatabase(current.settings.database.url), async () => config);
  const app = createApp({ state, log: () => undefined, clock, toolVersion: 'test' });
  const { maxConnections, maxConnectionsPerAddress } = config.settings.server;
  const server = await listen(app, { host: '127.0.0.1', port: 0, requestTimeout: 30, limits: { maxConnections, maxPerAddress: maxConnectionsPerAddress } });
  const bulk = new BulkRunner({ database: () => state.db, select: bulkSelection, clock, ...options.bulk });
  bulk.start();
  return {
    url: server.url,
    db,
    bulk,
    async stop() {
      await bulk.stop();
      await server.shutdown(1000);
      app.close();
      await state.closeDatabase();
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}
