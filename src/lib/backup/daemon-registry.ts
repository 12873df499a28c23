import { readFile, rm, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import pg from 'pg';
import { isPostgresUrl } from '../storage/open.js';

/** The application_name every `serve` connection carries, so that restores can see a daemon. */
export const DAEMON_APPLICATION_NAME = 'license-server serve';

function pidFile(sqlitePath: string): string {
  return `${sqlitePath}.serve`;
}

/** Marks a SQLite database as served by this process; returns the unmark function. */
export async function registerDaemon(databaseUrl: string): Promise<() => Promise<void>> {
  if (isPostgresUrl(databaseUrl)) return async () => undefined;
  const file = pidFile(databaseUrl);
  await writeFile(file, JSON.stringify({ pid: process.pid, host: hostname(), started_at: new Date().toISOString() }), { mode: 0o600 });
  return async () => {
    await rm(file, { force: true });
  };
}

/** A description of the daemon using the database, or undefined when none is. */
export async function daemonUsing(databaseUrl: string): Promise<string | undefined> {
  if (isPostgresUrl(databaseUrl)) {
    const client = new pg.Client({ connectionString: databaseUrl, application_name: 'license-server restore' });
    try {
      await client.connect();
      const { rows } = await client.query<{ addr: string | null; pid: number }>(
        'SELECT client_addr::text AS addr, pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()',
        [DAEMON_APPLICATION_NAME],
      );
      return rows.length ? `${rows.length} connection(s) from ${[...new Set(rows.map((row) => row.addr ?? 'local'))].join(', ')}` : undefined;
    } catch {
      return undefined;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  try {
    const holder = JSON.parse(await readFile(pidFile(databaseUrl), 'utf8')) as { pid: number; host: string };
    if (holder.host !== hostname()) return `process ${holder.pid} on ${holder.host}`;
    try {
      process.kill(holder.pid, 0);
      return `process ${holder.pid}`;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM' ? `process ${holder.pid}` : undefined;
    }
  } catch {
    return undefined;
  }
}
