import { createHash } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import copy from 'pg-copy-streams';
import { LicenseServerError } from '../errors.js';
import { TABLES } from '../storage/migrations.js';
import { readDumpSchema, quoteIdent } from './postgres-schema.js';
import { Spool } from './spool.js';

export interface PostgresDump {
  readonly schemaVersion: number;
  /** The dump is these files one after the other. */
  readonly files: readonly string[];
  readonly size: number;
  readonly sha256: string;
}

export interface DumpOptions {
  /**
   * A table at least this large (bytes on disk) is copied on a second connection, beside
   * the rest. Tests set 0 to take that path on small data.
   */
  readonly parallelFrom?: number;
}

// Below this a second connection costs more than it saves.
const PARALLEL_FROM = 64 * 1024 * 1024;

/**
 * A plain-SQL dump of our tables that `psql --single-transaction -v ON_ERROR_STOP=1 -f`
 * loads into an empty database, made with no pg_dump binary (docs/backup-format.md,
 * "database/postgres.sql"): the bare tables, each table's rows as a COPY block, then keys,
 * indexes and foreign keys (postgres-schema.ts). Everything is read in one snapshot: a
 * REPEATABLE READ READ ONLY transaction holding ACCESS SHARE locks on our tables (so no
 * migration rewrites one under it), and the largest table is copied on a second connection
 * that imports that snapshot, since on a large database the server's COPY output is the
 * slowest step. Rows stream from the server to files in `directory`, one per run of
 * consecutive pieces from one connection; a single reader follows them in order to compute
 * the SHA-256 and size of the dump as it is written. Memory stays flat whatever the size.
 */
export async function dumpPostgres(url: string, directory: string, options: DumpOptions = {}): Promise<PostgresDump> {
  const main = await connect(url);
  const clients = [main];
  const spools: Spool[] = [];
  try {
    const { schemaVersion, tables } = await beginSnapshot(main);
    const schema = await readDumpSchema(main, tables);
    const columns = new Map<string, string>();
    for (const table of tables) columns.set(table, await columnList(main, table));

    // Who copies what: the largest table on a second connection when it is large enough.
    const sizes = (await main.query<{ name: string; size: string }>(
      'SELECT name, pg_catalog.pg_table_size(name::regclass)::text AS size FROM unnest($1::text[]) AS name',
      [tables],
    )).rows;
    const largest = sizes.reduce((best, row) => (Number(row.size) > Number(best.size) ? row : best), sizes[0]!);
    const parallel = tables.length > 1 && Number(largest.size) >= (options.parallelFrom ?? PARALLEL_FROM);
    if (parallel) {
      const snapshot = (await main.query<{ id: string }>('SELECT pg_catalog.pg_export_snapshot() AS id')).rows[0]!.id;
      const second = await connect(url);
      clients.push(second);
      await second.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      await second.query(`SET TRANSACTION SNAPSHOT '${snapshot}'`);
    }

    // The dump in order; each piece is written by one connection.
    type Piece = { readonly connection: number; readonly table?: string; readonly text?: string };
    const pieces: Piece[] = [
      { connection: 0, text: header(schemaVersion, schema.tables) },
      ...tables.map((table) => ({ connection: parallel && table === largest.name ? 1 : 0, table })),
      { connection: 0, text: footer(schema.sequences, schema.constraints) },
    ];
    // Consecutive pieces of one connection share a file.
    const runs: Array<{ connection: number; pieces: Piece[] }> = [];
    for (const piece of pieces) {
      const last = runs[runs.length - 1];
      if (last && last.connection === piece.connection) last.pieces.push(piece);
      else runs.push({ connection: piece.connection, pieces: [piece] });
    }
    for (const [i] of runs.entries()) spools.push(await Spool.create(path.join(directory, `postgres-${String(i).padStart(2, '0')}.sql`)));

    const produce = async (connection: number) => {
      for (const [i, run] of runs.entries()) {
        if (run.connection !== connection) continue;
        const spool = spools[i]!;
        try {
          for (const piece of run.pieces) {
            if (piece.text !== undefined) {
              await spool.write(piece.text);
              continue;
            }
            const list = `${quoteIdent(piece.table!)} (${columns.get(piece.table!)})`;
            await spool.write(`COPY ${list} FROM stdin;\n`);
            for await (const chunk of clients[connection]!.query(copy.to(`COPY ${list} TO STDOUT`))) await spool.write(chunk as Buffer);
            await spool.write('\\.\n\n');
          }
          await spool.end();
        } catch (error) {
          await spool.fail(error);
          throw error;
        }
      }
    };
    const hash = createHash('sha256');
    let size = 0;
    const follow = async () => {
      for (const spool of spools) {
        await spool.follow((chunk) => {
          hash.update(chunk);
          size += chunk.length;
        });
      }
    };
    const work = [follow(), ...clients.map((_, connection) => produce(connection))];
    const outcome = await Promise.allSettled(work.map((promise) => promise.catch(async (error: unknown) => {
      // One failure stops the rest: the follower and the other connection would wait forever.
      for (const spool of spools) await spool.fail(error);
      for (const client of clients) await client.end().catch(() => undefined);
      throw error;
    })));
    const failed = outcome.find((result) => result.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    for (const client of clients) await client.query('COMMIT');
    return { schemaVersion, files: spools.map((spool) => spool.path), size, sha256: hash.digest('hex') };
  } catch (error) {
    for (const spool of spools) await spool.fail(error);
    throw error;
  } finally {
    for (const client of clients) await client.end().catch(() => undefined);
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
  const client = new pg.Client({ connectionString: url, application_name: 'license-server backup' });
  try {
    await client.connect();
  } catch (error) {
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot connect to PostgreSQL for the backup: ${(error as { code?: string }).code ?? 'error'}`);
  }
  // The row text depends on these, and a reader of the dump (a converter to SQLite, say) is
  // promised one form: timestamptz as `2026-11-23 10:15:00.123+00`, floats exact.
  await client.query("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET extra_float_digits = 3; SET bytea_output = 'hex'");
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
