import { createWriteStream, type WriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import pg from 'pg';
import copy from 'pg-copy-streams';
import { LicenseServerError } from '../errors.js';
import { MIGRATIONS, MIGRATIONS_TABLE, TABLES } from '../storage/migrations.js';

/**
 * A plain-SQL dump of our tables that `psql --single-transaction -v ON_ERROR_STOP=1 -f`
 * loads into an empty database, with no pg_dump binary: the schema from our own migrations
 * (up to the database's version), then each table's rows as a COPY block, all read in one
 * REPEATABLE READ READ ONLY transaction so the tables agree with each other. Rows stream
 * from the server to the file; memory stays flat whatever the size.
 */
export async function dumpPostgres(url: string, target: string): Promise<{ schemaVersion: number }> {
  const client = new pg.Client({ connectionString: url, application_name: 'license-server backup' });
  try {
    await client.connect();
  } catch (error) {
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot connect to PostgreSQL for the backup: ${(error as { code?: string }).code ?? 'error'}`);
  }
  const out = createWriteStream(target, { mode: 0o600 });
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_migrations');
    const schemaVersion = Number(rows[0]?.version ?? 0);
    await write(out, [
      '-- license-server PostgreSQL dump (docs/backup-format.md, "database/postgres.sql")',
      `-- schema version ${schemaVersion}`,
      '-- Load into an empty database: psql --single-transaction -v ON_ERROR_STOP=1 -d DB -f postgres.sql',
      "SET client_encoding = 'UTF8';",
      'SET standard_conforming_strings = on;',
      `${MIGRATIONS_TABLE.postgres};`,
      ...MIGRATIONS.filter((migration) => migration.version <= schemaVersion).flatMap((migration) => [
        `-- migration ${migration.version}: ${migration.name}`,
        ...migration.postgres.map((statement) => `${statement};`),
      ]),
      '',
    ].join('\n'));
    for (const table of TABLES.filter((candidate) => candidate.since <= schemaVersion)) {
      const columns = (
        await client.query<{ column_name: string }>(
          `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`,
          [table.name],
        )
      ).rows.map((row) => `"${row.column_name}"`);
      const list = `${table.name} (${columns.join(', ')})`;
      await write(out, `COPY ${list} FROM stdin;\n`);
      const source = client.query(copy.to(`COPY ${list} TO STDOUT`));
      for await (const chunk of source) {
        if (!out.write(chunk)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
      }
      await write(out, '\\.\n\n');
    }
    await write(out, "SELECT setval(pg_get_serial_sequence('audit_log', 'id'), coalesce(max(id), 1), max(id) IS NOT NULL) FROM audit_log;\n");
    await client.query('COMMIT');
    out.end();
    await finished(out);
    return { schemaVersion };
  } catch (error) {
    out.destroy();
    throw error;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function write(out: WriteStream, text: string): Promise<void> {
  return new Promise((resolve, reject) => out.write(text, (error) => (error ? reject(error) : resolve())));
}
