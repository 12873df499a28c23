import { readdirSync } from 'node:fs';
import path from 'node:path';
import { isPostgresUrl } from '../storage/open.js';

/**
 * What every `serve` publishes for its whole life: the key-encryption key it holds (by kek
 * id), or that it holds none, so that `signing-key protect` can tell before it seals the
 * keys which running daemons could no longer sign (README, "Signing keys"). Published as a
 * lock, like the daemon lock, so that it disappears with its holder however it dies:
 *
 * - PostgreSQL: a shared session advisory lock (NAMESPACE, kekLockKey(kek id)) on a
 *   connection of its own, taken again when that connection is lost;
 * - SQLite: a SHARED lock on the side file `<database>.daemon-kek-<kek id | none>`.
 */
export interface KekAnnouncement {
  release(): Promise<void>;
}

/** Classid of the two-key advisory locks; different from every other lock of ours. */
const NAMESPACE = 0x4c53_4b4b;
const RETAKE_MS = 1000;

/** The second key of a daemon's lock: 0 without a key-encryption key, else from its kek id. */
function kekLockKey(kekId: string | null): number {
  return kekId === null ? 0 : Number.parseInt(kekId.slice(0, 7), 16) + 1;
}

export function kekLockFile(database: string, kekId: string | null): string {
  return `${database}.daemon-kek-${kekId ?? 'none'}`;
}

/** Held by `serve` from before it opens the database until it exits. */
export async function announceDaemonKek(databaseUrl: string, kekId: string | null): Promise<KekAnnouncement> {
  if (isPostgresUrl(databaseUrl)) return PostgresAnnouncement.take(databaseUrl, kekId);
  const { SqliteLockFile } = await import('../backup/locks/sqlite-lock-file.js');
  const lock = SqliteLockFile.open(kekLockFile(databaseUrl, kekId));
  // Only a protect's check holds it EXCLUSIVE, and for a moment.
  for (let attempt = 0; !lock.tryShared() && attempt < 200; attempt += 1) await sleep(10);
  return { release: async () => lock.close() };
}

/**
 * The running daemons of the database that could not open keys sealed under the key whose
 * id is `kekId` (they hold none, or another one), described for a message; empty when none.
 */
export async function daemonsWithoutKek(databaseUrl: string, kekId: string): Promise<string[]> {
  return isPostgresUrl(databaseUrl) ? postgresDaemonsWithout(databaseUrl, kekId) : sqliteDaemonsWithout(databaseUrl, kekId);
}

async function sqliteDaemonsWithout(database: string, kekId: string): Promise<string[]> {
  const { SqliteLockFile } = await import('../backup/locks/sqlite-lock-file.js');
  const prefix = `${path.basename(database)}.daemon-kek-`;
  let names: string[];
  try {
    names = readdirSync(path.dirname(database));
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const name of names.filter((candidate) => candidate.startsWith(prefix)).sort()) {
    const held = name.slice(prefix.length);
    if (held === kekId) continue;
    const lock = SqliteLockFile.open(path.join(path.dirname(database), name));
    try {
      if (lock.tryExclusive()) continue;
    } finally {
      lock.close();
    }
    found.push(`a daemon ${held === 'none' ? 'without a key-encryption key' : `with another key-encryption key (kek id ${held})`}, holding ${path.join(path.dirname(database), name)}`);
  }
  return found;
}

async function postgresDaemonsWithout(url: string, kekId: string): Promise<string[]> {
  const [{ newPostgresClient }, { describeSession }] = await Promise.all([
    import('../storage/postgres-connection.js'),
    import('../backup/locks/daemon-lock-postgres.js'),
  ]);
  const client = newPostgresClient(url, 'license-server protect');
  try {
    await client.connect();
    const { rows } = await client.query<{ held: string; pid: number; addr: string | null; app: string | null }>(
      `SELECT l.objid::bigint AS held, l.pid, host(a.client_addr) AS addr, a.application_name AS app
         FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = $1 AND l.objsubid = 2
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY l.pid`,
      [NAMESPACE],
    );
    return rows
      .filter((row) => Number(row.held) !== kekLockKey(kekId))
      .map((row) => `a daemon ${Number(row.held) === 0 ? 'without a key-encryption key' : 'with another key-encryption key'} (${describeSession(row)})`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

class PostgresAnnouncement implements KekAnnouncement {
  private client: import('pg').Client | undefined;
  private released = false;

  private constructor(
    private readonly url: string,
    private readonly key: number,
  ) {}

  static async take(url: string, kekId: string | null): Promise<PostgresAnnouncement> {
    const announcement = new PostgresAnnouncement(url, kekLockKey(kekId));
    await announcement.connect();
    return announcement;
  }

  async release(): Promise<void> {
    this.released = true;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const [{ newPostgresClient }, { processApplicationName }] = await Promise.all([
      import('../storage/postgres-connection.js'),
      import('../backup/locks/daemon-lock-postgres.js'),
    ]);
    // Named as the daemon lock's connection is, so that protect can name the daemon's process.
    const client = newPostgresClient(this.url, processApplicationName('license-server serve'));
    try {
      await client.connect();
    } catch (error) {
      await client.end().catch(() => undefined);
      const [{ postgresUnavailable }, { redactDatabaseUrl }] = await Promise.all([import('../storage/postgres.js'), import('../config/redact.js')]);
      throw postgresUnavailable(redactDatabaseUrl(this.url), error);
    }
    try {
      // Nothing ever takes it exclusively: this never waits.
      await client.query('SELECT pg_advisory_lock_shared($1, $2)', [NAMESPACE, this.key]);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.released) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    client.once('end', () => {
      if (this.client === client) {
        this.client = undefined;
        void this.retake();
      }
    });
  }

  /** A server restart ends the session and its lock: published again once it is back. */
  private async retake(): Promise<void> {
    while (!this.released) {
      await sleep(RETAKE_MS);
      if (this.released) return;
      try {
        await this.connect();
        return;
      } catch {
        // Not back yet.
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
