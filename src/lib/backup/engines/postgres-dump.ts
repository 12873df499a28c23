import path from 'node:path';
import type pg from 'pg';
import { LicenseServerError } from '../../errors.js';
import { TABLES } from '../../storage/migrations.js';
import { newPostgresClient } from '../../storage/postgres-connection.js';
import { readDumpSchema, quoteIdent } from './postgres-schema.js';
import { CompressedSpool } from '../archive/compressed-spool.js';
import { COPY_OUT_BLOCK, CopyOut } from './copy-out.js';

// A 4 KiB deflate window instead of 32 KiB: rows of a table repeat their neighbours', and
// zlib's fastest level then finds as many matches in less time. Measured on the bench's
// audit_log and licenses rows: 320 -> 405 and 127 -> 175 MB/s of CPU, compressed 7.38:1 ->
// 7.91:1 and 3.41:1 -> 3.58:1. Every inflater reads it (the window is the decoder's limit,
// not a format setting).
const DUMP_WINDOW_BITS = 12;

export interface PostgresDump {
  readonly schemaVersion: number;
  /** The dump as gzip members (CompressedSpool), ready to be copied into the archive... */
  readonly compressed: string;
  /** ...and their lengths. */
  readonly members: readonly number[];
  /** Size and SHA-256 of the dump itself (uncompressed). */
  readonly size: number;
  readonly sha256: string;
}

/**
 * A plain-SQL dump of our tables that `psql --single-transaction -v ON_ERROR_STOP=1 -f`
 * loads into an empty database, made with no pg_dump binary (docs/backup-format.md,
 * "database/postgres.sql"): the bare tables, each table's rows as a COPY block, then keys,
 * indexes and foreign keys (postgres-schema.ts). Everything is read in one snapshot: a
 * REPEATABLE READ READ ONLY transaction holding ACCESS SHARE locks on our tables (so no
 * migration rewrites one under it). Rows stream from the server on one connection and are
 * hashed and compressed as they arrive, into `directory`/postgres.sql.gz. One connection,
 * not one per large table: on two cores the server's COPY output and our compression
 * already keep both busy, and a second stream could only be hashed in dump order after a
 * round trip through the disk (measured: slower overall). Memory stays flat whatever the size.
 */
export async function dumpPostgres(url: string, directory: string): Promise<PostgresDump> {
  const client = await connect(url);
  const spool = new CompressedSpool(path.join(directory, 'postgres.sql.gz'), { level: 1, windowBits: DUMP_WINDOW_BITS, blockSize: COPY_OUT_BLOCK });
  try {
    const { schemaVersion, tables } = await beginSnapshot(client);
    const schema = await readDumpSchema(client, tables);
    await spool.write(header(schemaVersion, schema.tables));
    for (const table of tables) {
      const list = `${quoteIdent(table)} (${await columnList(client, table)})`;
      await spool.write(`COPY ${list} FROM stdin;\n`);
      for await (const chunk of client.query(new CopyOut(`COPY ${list} TO STDOUT`))) await spool.write(chunk as Buffer);
      await spool.write('\\.\n\n');
    }
    await spool.write(footer(schema.sequences, schema.constraints));
    const digest = await spool.end();
    await client.query('COMMIT');
    return { schemaVersion, compressed: spool.path, ...digest };
  } catch (error) {
    await spool.abort(error);
    throw error;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Starts the dump's transaction on `client`: our tables locked (ACCESS SHARE, taken before
 * the snapshot, so that every table is read as the snapshot sees it), then the schema
 * version as of the snapshot. A migration that made a table between our listing and our
 * lock is caught by the version; the listing is then taken again.
 */
async function beginSnapshot(client: pg.Client): Promise<{ schemaVersion: number; tables: string[] }> {
  for (let attempt = 1; ; attempt += 1) {
    const present = new Set(
      (await client.query<{ name: string }>('SELECT name FROM unnest($1::text[]) AS name WHERE pg_catalog.to_regclass(name) IS NOT NULL', [TABLES.map((table) => table.name)])).rows.map((row) => row.name),
    );
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    if (present.size > 0) await client.query(`LOCK TABLE ${[...present].map(quoteIdent).join(', ')} IN ACCESS SHARE MODE`);
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_migrations');
    const schemaVersion = Number(rows[0]?.version ?? 0);
    const tables = TABLES.filter((table) => table.since <= schemaVersion).map((table) => table.name);
    if (tables.every((table) => present.has(table))) return { schemaVersion, tables };
    await client.query('ROLLBACK');
    if (attempt === 3) throw new LicenseServerError('DATABASE_UNAVAILABLE', 'the database schema kept changing during the backup; try again');
  }
}

async function connect(url: string): Promise<pg.Client> {
  const client = newPostgresClient(url, 'license-server backup');
  try {
    await client.connect();
  } catch (error) {
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot connect to PostgreSQL for the backup: ${(error as { code?: string }).code ?? (error as Error).message}`);
  }
  // The row text depends on these, and a reader of the dump (a converter to SQLite, say) is
  // promised one form: timestamptz as `2026-11-23 10:15:00.123+00`, floats exact. A dump's
  // COPY of a large table takes as long as it takes: no statement timeout, whatever the
  // role or database sets (docs/configuration.md, "PostgreSQL timeouts").
  await client.query("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET extra_float_digits = 3; SET bytea_output = 'hex'; SET statement_timeout = 0");
  return client;
}

async function columnList(client: pg.Client, table: string): Promise<string> {
  const { rows } = await client.query<{ name: string }>(
    'SELECT attname AS name FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum',
    [quoteIdent(table)],
  );
  return rows.map((row) => `"${row.name.replace(/"/g, '""')}"`).join(', ');
}

function header(schemaVersion: number, tables: readonly string[]): string {
  return [
    '-- license-server PostgreSQL dump (docs/backup-format.md, "database/postgres.sql")',
    `-- schema version ${schemaVersion}`,
    '-- Load into an empty database: psql --single-transaction -v ON_ERROR_STOP=1 -d DB -f postgres.sql',
    '-- Tables, then their rows, then keys, indexes and foreign keys.',
    "SET client_encoding = 'UTF8';",
    'SET standard_conforming_strings = on;',
    '',
    ...tables,
    '',
    '',
  ].join('\n');
}

function footer(sequences: readonly string[], constraints: readonly string[]): string {
  return [...sequences, '', ...constraints, ''].join('\n');
}
