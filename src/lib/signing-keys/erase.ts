import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Database } from '../storage/types.js';

/** How long the PostgreSQL table rewrite waits for its lock before it gives up (daemons read the table for every signature). */
const LOCK_TIMEOUT_MS = 5000;
/** How long the PostgreSQL rewrite waits for snapshots older than the change to end. */
const SNAPSHOT_WAIT_MS = 10_000;
/** Attempts of the SQLite checkpoint while a reader keeps it from reaching the end of the WAL. */
const CHECKPOINT_ATTEMPTS = 5;

/**
 * Erases from the database files the private key bytes a committed change replaced or
 * deleted (`signing-key protect` seals them, `retire` deletes them, a restore retires them
 * again): until then the engine keeps the old bytes on disk, however the row now reads
 * (docs/backup-format.md, "Erasing replaced private keys").
 *
 * - SQLite: every connection runs with secure_delete, so the page holding the new row has
 *   the old cell zeroed; but that page is in the WAL, while the main file keeps the old page
 *   until a checkpoint copies the new one over it (a running daemon's open connection puts
 *   that off for thousands of writes), and the WAL may hold older frames with the key.
 *   `wal_checkpoint(TRUNCATE)` copies every frame home and empties the WAL.
 * - PostgreSQL: an UPDATE leaves the old row version (with the key) in the table's heap
 *   until VACUUM reclaims its space, and even then the bytes stay in the page until they
 *   are overwritten. `VACUUM FULL signing_keys` writes the table anew and the server
 *   truncates the old file at commit. It needs the table's owner; PostgreSQL's WAL, WAL
 *   archives and base backups of the time keep their copies (the document says what to run).
 *
 * Returns null when the bytes are gone from the files, or why they may not be (the change
 * itself stands either way): the caller shows it as a warning.
 */
export async function eraseReplacedKeys(db: Database, databaseUrl: string, options: EraseOptions = {}): Promise<string | null> {
  if (db.engine !== 'sqlite') return rewritePostgresTable(databaseUrl);
  return options.aroundCheckpoint ? options.aroundCheckpoint(() => checkpointSqlite(db)) : checkpointSqlite(db);
}

export interface EraseOptions {
  /**
   * Runs the SQLite checkpoint: serve's replicator pauses Litestream around it, since
   * Litestream holds a read transaction open that keeps a TRUNCATE checkpoint from ever
   * reaching the end of the WAL (and starts a new generation after it).
   */
  readonly aroundCheckpoint?: (checkpoint: () => Promise<string | null>) => Promise<string | null>;
}

async function checkpointSqlite(db: Database): Promise<string | null> {
  for (let attempt = 1; ; attempt += 1) {
    const [result] = await db.query<{ busy: number; log: number; checkpointed: number }>('PRAGMA wal_checkpoint(TRUNCATE)');
    if (result && Number(result.busy) === 0) return null;
    if (attempt === CHECKPOINT_ATTEMPTS) break;
    await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
  }
  if (existsSync(path.join(path.dirname(db.location), `.${path.basename(db.location)}-litestream`))) {
    return (
      `Litestream, which serve runs beside ${db.location} to replicate it, holds a read lock that kept the checkpoint from finishing, so the replaced private key bytes ` +
      `may stay in ${db.location}-wal and ${db.location} until its next checkpoint; retire keys through the daemon's API, which pauses Litestream for it, ` +
      `or run \`sqlite3 ${db.location} 'PRAGMA wal_checkpoint(TRUNCATE)'\` while serve is stopped. The replicas keep the bytes until their retention ends`
    );
  }
  return (
    `a reader of the SQLite database kept the checkpoint from finishing, so the replaced private key bytes may stay in ${db.location}-wal ` +
    `and ${db.location} until the next checkpoint; run \`sqlite3 ${db.location} 'PRAGMA wal_checkpoint(TRUNCATE)'\` when the daemons are idle`
  );
}

/**
 * VACUUM FULL copies a dead row version that some snapshot may still see: one of another
 * session of this database (an autovacuum's ANALYZE of data just restored, a request in
 * flight), and its own, whose xmin is the oldest transaction running anywhere on the server
 * when it starts (a long transaction in another database counts). Waits up to
 * SNAPSHOT_WAIT_MS until no such snapshot or transaction older than the change is left; true
 * when some still was. Sessions of another role may not show theirs: those are not waited for.
 */
async function waitForOlderSnapshots(client: import('pg').Client): Promise<boolean> {
  // An xid begun after the change committed: whatever is not older began after it too.
  const after = (await client.query<{ xid: string }>('SELECT pg_current_xact_id()::xid::text AS xid')).rows[0]!.xid;
  const deadline = Date.now() + SNAPSHOT_WAIT_MS;
  for (;;) {
    const { rows } = await client.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM pg_stat_activity
                WHERE pid <> pg_backend_pid()
                  AND ((backend_xid IS NOT NULL AND age(backend_xid) > age($1::xid))
                    OR ((datname = current_database() OR datid IS NULL) AND backend_xmin IS NOT NULL AND age(backend_xmin) > age($1::xid))))
            + (SELECT count(*) FROM pg_prepared_xacts WHERE age(transaction) > age($1::xid)) AS n`,
      [after],
    );
    if (Number(rows[0]!.n) === 0) return false;
    if (Date.now() >= deadline) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function rewritePostgresTable(url: string): Promise<string | null> {
  const { newPostgresClient } = await import('../storage/postgres-connection.js');
  const client = newPostgresClient(url, 'license-server erase');
  const manual = 'the replaced private key bytes stay in a dead row version of signing_keys until `VACUUM FULL signing_keys` runs as the table\'s owner';
  try {
    await client.connect();
    await client.query(`SET lock_timeout = ${LOCK_TIMEOUT_MS}`);
    const waited = await waitForOlderSnapshots(client);
    await client.query('VACUUM FULL signing_keys');
    return waited
      ? 'the replaced private key bytes may stay in a dead row version of signing_keys: another session held a snapshot older than the change; run `VACUUM FULL signing_keys` as the table\'s owner once it has ended'
      : null;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === '42501') return `${manual} (this role does not own the table)`;
    if (code === '55P03') return `${manual} (another session held the table for more than ${LOCK_TIMEOUT_MS / 1000} s)`;
    return `${manual} (it failed: ${code ?? (error as Error).message.split('\n')[0]})`;
  } finally {
    await client.end().catch(() => undefined);
  }
}
