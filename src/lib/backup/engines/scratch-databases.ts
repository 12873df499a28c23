import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { endPostgresClient, newPostgresClient } from '../../storage/postgres-connection.js';
import { hostTag, ownerState } from '../locks/work-owner.js';

/**
 * `backup validate` loads a PostgreSQL dump into a scratch database beside the served one
 * and drops it afterwards; a validate killed meanwhile leaves it on the server. Its name
 * carries the maker's host tag and pid (work-owner.ts), and the maker's connection carries
 * the name as its application_name, so that a later process can tell a dead validate's
 * database from a live one's, on this host by the pid and from any host by the connection.
 */
const PREFIX = 'license_validate_';
const OWNED = /^license_validate_([0-9a-f]{8})_(\d+)_[0-9a-f]{6}$/;
// Names made before they carried their owner; their maker's connection said only this.
const UNOWNED = /^license_validate_[0-9a-f]{12}$/;
const UNOWNED_APPLICATION = 'license-server validate';

/** `license_validate_1a2b3c4d_4242_9f8e7d`: at most 40 characters, within PostgreSQL's 63. */
export function newScratchDatabaseName(): string {
  return `${PREFIX}${hostTag()}_${process.pid}_${randomBytes(3).toString('hex')}`;
}

/** The application_name of the connection that makes, fills and drops `name`. */
export function scratchApplicationName(name: string): string {
  return `license-server ${name}`;
}

interface Activity {
  readonly connected: ReadonlySet<string>;
  readonly applications: ReadonlySet<string>;
}

function isAlive(name: string, activity: Activity): boolean {
  if (activity.connected.has(name)) return true;
  const owned = OWNED.exec(name);
  if (owned) {
    if (owned[1] === hostTag()) return ownerState({ host: owned[1]!, pid: Number(owned[2]) }) !== 'gone';
    return activity.applications.has(scratchApplicationName(name));
  }
  return activity.applications.has(UNOWNED_APPLICATION);
}

/**
 * The scratch databases on `url`'s server whose validate is gone: on this host, its pid no
 * longer runs; elsewhere, nothing is connected to the database and no connection carries
 * its name. [] when the server cannot be reached (a list must not fail for it).
 */
export async function deadScratchDatabases(url: string): Promise<string[]> {
  return (await withClient(url, async (client) => {
    const { rows: databases } = await client.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY datname`,
      [PREFIX],
    );
    const ours = databases.map((row) => row.datname).filter((name) => OWNED.test(name) || UNOWNED.test(name));
    if (ours.length === 0) return [];
    const { rows: sessions } = await client.query<{ datname: string | null; application_name: string | null }>(
      'SELECT datname, application_name FROM pg_stat_activity WHERE pid <> pg_backend_pid()',
    );
    const activity: Activity = {
      connected: new Set(sessions.map((row) => row.datname ?? '')),
      applications: new Set(sessions.map((row) => row.application_name ?? '')),
    };
    return ours.filter((name) => !isAlive(name, activity));
  })) ?? [];
}

/** Drops the scratch databases of dead validates; returns the names dropped. Best effort. */
export async function dropDeadScratchDatabases(url: string): Promise<string[]> {
  const dead = await deadScratchDatabases(url);
  if (dead.length === 0) return [];
  return (await withClient(url, async (client) => {
    const dropped: string[] = [];
    for (const name of dead) {
      // FORCE: a dead client's backend may linger a moment after its process is gone.
      const done = await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).then(() => true, () => false);
      if (done) dropped.push(name);
    }
    return dropped;
  })) ?? [];
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T | undefined> {
  const client = newPostgresClient(url, 'license-server debris check', { connectTimeout: 3 });
  try {
    await client.connect();
    return await work(client);
  } catch {
    return undefined;
  } finally {
    await endPostgresClient(client, 1000);
  }
}
