import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { redactDatabaseUrl } from '../../config/redact.js';
import { LicenseServerError } from '../../errors.js';
import { TABLES } from '../../storage/migrations.js';
import { inTurn, newPostgresClient } from '../../storage/postgres-connection.js';
import { toNumberedPlaceholders } from '../../storage/placeholders.js';
import { CREATE_TRIGRAM_EXTENSION } from '../../storage/trigram-indexes.js';
import type { Queryable, Row, SqlValue } from '../../storage/types.js';
import { loadDump } from './postgres-load.js';
import { CARRIED_TABLES, type CarryTables, type RevocationCarry } from '../revocations.js';
import { keySummariesOf, type KeySummary, type SigningKeyCarry } from '../signing-key-carry.js';
import { newScratchDatabaseName, scratchApplicationName } from './scratch-databases.js';


async function hasTable(client: { query<R extends Row>(sql: string, params?: unknown[]): Promise<{ rows: R[] }> }, name: string): Promise<boolean> {
  const result = await client.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', [name]);
  return result.rows[0]!.present;
}

/** Whether `table`, in the schema the search path finds first, has `column` (signing_keys before schema 5 has fewer). */
async function hasColumn(client: { query<R extends Row>(sql: string, params?: unknown[]): Promise<{ rows: R[] }> }, table: string, column: string): Promise<boolean> {
  const result = await client.query<{ present: boolean }>(
    'SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2) AS present',
    [table, column],
  );
  return result.rows[0]!.present;
}

/** The tables and columns of the revocation carry that the schema the search path finds first has (revocations.ts CarryTables). */
async function carriedTables(client: { query<R extends Row>(sql: string, params?: unknown[]): Promise<{ rows: R[] }> }): Promise<CarryTables> {
  const machines = await hasTable(client, 'machines');
  const activationRequests = await hasTable(client, 'activation_requests');
  return {
    machines,
    machineKeys: machines && await hasColumn(client, 'machines', 'machine_key'),
    activationRequests,
    requestDigests: activationRequests && await hasColumn(client, 'activation_requests', 'request_digest'),
  };
}

/**
 * Replaces our tables with a dump's in one transaction (openPostgresRestore): the dump is
 * loaded beside them, then they are swapped and the transaction commits. Any failure rolls
 * back, leaving the database exactly as it was. The revocations of the replaced data are
 * read first (with writes to those tables locked out until the commit) and re-applied
 * before the commit, so they are never undone, not even for a moment.
 */
export async function restorePostgres(url: string, dumpFile: string, carry: RevocationCarry, keys: SigningKeyCarry, at: Date): Promise<void> {
  const restore = await openPostgresRestore(url, carry, keys, at);
  try {
    await restore.load(dumpFile);
    await restore.commit();
  } finally {
    await restore.close();
  }
}

/** A restore transaction, open: load a dump beside the old tables, then swap and commit. */
export interface PostgresRestore {
  /** Runs the dump (a file, or bytes as they are read from the archive) into a schema of its own. */
  load(dump: string | AsyncIterable<Buffer>): Promise<void>;
  /** The signing keys the loaded dump holds (none when it has no such table), read before the swap. */
  signingKeys(): Promise<KeySummary[]>;
  /** Drops the old tables, moves the loaded ones in their place, re-applies the carried revocations, commits. */
  commit(): Promise<void>;
  /** Rolls back unless committed, and disconnects. */
  close(): Promise<void>;
}

/**
 * Begins the replacement: reads the revocations to carry (locking writes to those tables
 * until the end) and makes an empty schema for the dump, all inside one transaction that
 * nothing outside sees until commit(). The old tables stay readable meanwhile: a restore
 * that streams its dump while the archive is still being checked opens this first, and once
 * the whole archive has passed, takes its pre-restore backup of the old tables, then
 * commits; a damaged archive rolls back with nothing taken or changed.
 */
export async function openPostgresRestore(url: string, carry: RevocationCarry, keys: SigningKeyCarry, at: Date): Promise<PostgresRestore> {
  const client = await connect(url, 'license-server restore');
  // The carries' statements take turns on the one connection, whatever their callers do.
  const tx: Queryable = {
    query: async <R extends Row>(sql: string, params: readonly SqlValue[] = []) => (await inTurn(client, () => client.query(toNumberedPlaceholders(sql), [...params]))).rows as R[],
    execute: async (sql: string, params: readonly SqlValue[] = []) => (await inTurn(client, () => client.query(toNumberedPlaceholders(sql), [...params]))).rowCount ?? 0,
  };
  // Without a commit, ending the session rolls the transaction back; an explicit ROLLBACK
  // could wait forever behind a COPY its source stopped feeding.
  const close = async () => {
    await client.end().catch(() => undefined);
  };
  const staging = `license_restore_${randomBytes(6).toString('hex')}`;
  /** The schema our tables are in, as an identifier. */
  let home = 'public';
  try {
    await client.query('BEGIN');
    const present = await client.query<{ n: number }>(
      `SELECT count(to_regclass(name))::int AS n FROM unnest($1::text[]) AS name`,
      [[...CARRIED_TABLES]],
    );
    if (present.rows[0]!.n === CARRIED_TABLES.length) {
      const tables = await carriedTables(client);
      await client.query(`LOCK TABLE ${[...CARRIED_TABLES, 'signing_keys', ...(tables.machines ? ['machines'] : []), ...(tables.activationRequests ? ['activation_requests'] : [])].join(', ')} IN SHARE MODE`);
      await carry.read(tx, tables);
      await keys.read(tx, { current: await hasColumn(client, 'signing_keys', 'retired_at') });
    }
    // The dump is written unqualified (docs/backup-format.md), so it loads wherever the
    // search_path points; our tables are in the schema it pointed to before.
    // Quoted by PostgreSQL itself: any schema name, reserved words included.
    home = (await client.query<{ schema: string }>('SELECT pg_catalog.quote_ident(current_schema()) AS schema')).rows[0]!.schema;
    // The dump's own attempt would put pg_trgm in the schema it loads into, which is dropped
    // at the end: made here first, it lands beside our tables, where migrations put it.
    await client.query(CREATE_TRIGRAM_EXTENSION);
    await client.query(`CREATE SCHEMA ${staging}`).catch((error: unknown) => {
      if ((error as { code?: string }).code !== '42501') throw error;
      throw new LicenseServerError('DATABASE_UNAVAILABLE', 'the restore may not create a schema in this database (it loads the backup into one beside the tables it replaces); nothing was changed', {
        hint: 'Restore as the database owner, or grant the restoring role CREATE on the database (GRANT CREATE ON DATABASE name TO role).',
      });
    });
    // Behind the new schema, the old one: a default calling a function of ours still resolves.
    await client.query(`SELECT pg_catalog.set_config('search_path', $1, true)`, [`${staging}, ${home}`]);
  } catch (error) {
    await close();
    throw asBackupError(error);
  }
  return {
    load: async (dump) => {
      try {
        await loadDump(client, dump);
      } catch (error) {
        throw asBackupError(error);
      }
    },
    signingKeys: async () => {
      try {
        // Named in the loaded schema itself: unqualified, a dump without the table would read ours.
        const present = await client.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', [`${staging}.signing_keys`]);
        if (!present.rows[0]!.present) return [];
        const current = await client.query<{ present: boolean }>(
          "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'signing_keys' AND column_name = 'retired_at') AS present",
          [staging],
        );
        return keySummariesOf(await tx.query(`SELECT * FROM ${staging}.signing_keys`), current.rows[0]!.present);
      } catch (error) {
        throw asBackupError(error);
      }
    },
    commit: async () => {
      try {
        await client.query(`SELECT pg_catalog.set_config('search_path', $1, true)`, [home]);
        for (const table of [...TABLES].reverse()) await client.query(`DROP TABLE IF EXISTS ${table.name} CASCADE`);
        const loaded = await client.query<{ name: string }>(
          `SELECT pg_catalog.quote_ident(c.relname) AS name FROM pg_catalog.pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'p')`,
          [staging],
        );
        // Indexes, constraints and identity sequences move with their tables.
        for (const { name } of loaded.rows) await client.query(`ALTER TABLE ${staging}.${name} SET SCHEMA ${home}`);
        // RESTRICT: anything else the dump made is refused rather than dropped unseen.
        await client.query(`DROP SCHEMA ${staging} RESTRICT`);
        await carry.apply(tx, await carriedTables(client));
        await keys.apply(tx, { current: await hasColumn(client, 'signing_keys', 'retired_at'), at });
        await client.query('COMMIT');
      } catch (error) {
        throw asBackupError(error);
      }
    },
    close,
  };
}

/** Loads a dump into a fresh scratch database beside `url`'s, counts its rows, drops it. */
export async function loadDumpIntoScratch(url: string, dumpFile: string): Promise<number> {
  const name = newScratchDatabaseName();
  // Named after the database until it is dropped, so that no other process takes it for a dead validate's.
  const admin = await connect(url, scratchApplicationName(name));
  try {
    await admin.query(`CREATE DATABASE ${name}`).catch((error: unknown) => {
      throw asBackupError(error);
    });
    const scratchUrl = new URL(url);
    scratchUrl.pathname = `/${name}`;
    const client = await connect(scratchUrl.toString(), 'license-server validate');
    try {
      await client.query('BEGIN');
      await executeDump(client, dumpFile);
      let rows = 0;
      for (const table of TABLES) {
        const result = await client.query(`SELECT count(*)::bigint AS n FROM ${table.name}`).catch(() => undefined);
        rows += Number(result?.rows[0]?.n ?? 0);
      }
      await client.query('COMMIT');
      return rows;
    } catch (error) {
      throw asBackupError(error);
    } finally {
      await client.end().catch(() => undefined);
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end().catch(() => undefined);
  }
}

/** Runs a dump written by dumpPostgres, of either layout, inside the caller's transaction (postgres-load.ts). */
async function executeDump(client: pg.Client, dumpFile: string): Promise<void> {
  await loadDump(client, dumpFile);
}

/** A connection of its own; a database that does not exist is named with the command that makes it. */
export async function connect(url: string, applicationName: string): Promise<pg.Client> {
  const client = newPostgresClient(url, applicationName);
  try {
    await client.connect();
    // A restore's load and index builds, and a validation's, take as long as they take,
    // whatever the role or database sets (docs/configuration.md, "PostgreSQL timeouts").
    await client.query('SET statement_timeout = 0');
  } catch (error) {
    await client.end().catch(() => undefined);
    if ((error as { code?: string }).code === '3D000') throw missingDatabase(url);
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot connect to PostgreSQL: ${(error as { code?: string }).code ?? (error as Error).message}`);
  }
  return client;
}

function missingDatabase(url: string): LicenseServerError {
  const parsed = new URL(url);
  const name = decodeURIComponent(parsed.pathname.slice(1));
  const where = [parsed.hostname && `-h ${quoteShell(parsed.hostname)}`, parsed.port && `-p ${parsed.port}`, parsed.username && `-U ${quoteShell(decodeURIComponent(parsed.username))}`].filter(Boolean).join(' ');
  return new LicenseServerError('DATABASE_NOT_FOUND', `the PostgreSQL database "${name}" does not exist on ${redactDatabaseUrl(url)}; a restore fills an existing database and does not create one`, {
    hint: `Create it first (as a role allowed to create databases), e.g. \`createdb ${where ? `${where} ` : ''}${quoteShell(name)}\`, then restore again.`,
  });
}

function quoteShell(name: string): string {
  return /^[A-Za-z0-9_.-]+$/.test(name) ? name : `'${name.replace(/'/g, "'\\''")}'`;
}

/**
 * What the server refused, as ours: a refusal of the dump's content is a damaged backup; the
 * server itself out of disk or other resources (SQLSTATE class 53) says nothing of the backup,
 * and must not send the operator away from a good one.
 */
function asBackupError(error: unknown): unknown {
  if (error instanceof LicenseServerError) return error;
  const code = (error as { code?: string }).code;
  const said = `${code}: ${(error as Error).message.split('\n')[0]}`;
  if (code === '53100') {
    return new LicenseServerError('DATABASE_DISK_FULL', `the PostgreSQL server ran out of disk space during the load (${said}); nothing was changed`, {
      cause: error,
      hint: 'Free space on the PostgreSQL server (its data directory or the database\'s tablespace), then run the command again; the backup itself is fine.',
    });
  }
  if (code?.startsWith('53')) {
    return new LicenseServerError('DATABASE_UNAVAILABLE', `the PostgreSQL server ran out of resources during the load (${said}); nothing was changed`, { cause: error });
  }
  if (code && /^[0-9A-Z]{5}$/.test(code)) {
    return new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: PostgreSQL refused the dump (${code}: ${(error as Error).message.split('\n')[0]})`);
  }
  return error;
}
