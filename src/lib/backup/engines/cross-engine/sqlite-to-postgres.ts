import { createWriteStream, type WriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { LicenseServerError } from '../../../errors.js';
import { columnKind } from '../../../storage/column-kinds.js';
import { MIGRATIONS, MIGRATIONS_TABLE, TABLES } from '../../../storage/migrations.js';
import { loadSqliteDriver } from '../../../storage/sqlite-driver.js';
import { rowName } from './row-name.js';
import { sqliteToCopyField, ValueRefused } from './portable-values.js';

export interface ConvertedTables {
  readonly schemaVersion: number;
  /** Rows per table, in load order. */
  readonly rows: Readonly<Record<string, number>>;
}

/**
 * Writes a PostgreSQL dump (docs/backup-format.md, "database/postgres.sql") of a SQLite
 * database file, so that a SQLite backup is restored into PostgreSQL by the very code, and
 * in the one transaction, that restores a PostgreSQL backup. The schema is our migrations'
 * PostgreSQL side up to the file's schema version; every value is checked and converted on
 * the way (portable-values.ts), and the first one PostgreSQL could not store stops the
 * conversion with BACKUP_NOT_PORTABLE naming its table, row and column, before anything is
 * replaced.
 */
export async function writePostgresDumpOfSqlite(sqliteFile: string, target: string): Promise<ConvertedTables> {
  const Database = loadSqliteDriver();
  const source = new Database(sqliteFile, { readonly: true, fileMustExist: true });
  const out = createWriteStream(target, { mode: 0o600 });
  // A failed write (a full disk) rejects its write() below; unlistened, the event would end the process.
  out.on('error', () => undefined);
  const rows: Record<string, number> = {};
  try {
    const schemaVersion = Number((source.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null }).version ?? 0);
    if (schemaVersion < 1) throw new LicenseServerError('BACKUP_CORRUPT', 'backup is damaged: its SQLite database records no schema version');
    await write(out, [
      '-- license-server PostgreSQL dump (docs/backup-format.md, "database/postgres.sql")',
      `-- schema version ${schemaVersion}`,
      '-- converted from a SQLite backup by `license-server backup restore`',
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
      const info = source.prepare(`PRAGMA table_info(${table.name})`).all() as Array<{ name: string; pk: number }>;
      if (info.length === 0) throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: its SQLite database of schema ${schemaVersion} has no table ${table.name}`);
      const columns = info.map((column) => {
        const kind = columnKind(table.name, column.name);
        if (!kind) throw new LicenseServerError('BACKUP_UNSUPPORTED', `the backup's table ${table.name} has a column ${column.name} that this license-server does not know`);
        return { name: column.name, kind, pk: column.pk };
      });
      const statement = source.prepare(`SELECT ${columns.map((column) => `"${column.name}"`).join(', ')}, rowid FROM ${table.name} ORDER BY rowid`).raw(true).safeIntegers(true);
      // The driver reads text as UTF-8 and puts U+FFFD where the bytes are not; only then are
      // the bytes themselves fetched, to tell a real U+FFFD from bytes PostgreSQL would refuse.
      // (Reading every text value as bytes costs four times as long.)
      const bytesOf = (column: string, rowid: unknown) => source.prepare(`SELECT CAST("${column}" AS BLOB) FROM ${table.name} WHERE rowid = ?`).pluck().get(rowid);
      await write(out, `COPY ${table.name} (${columns.map((column) => `"${column.name}"`).join(', ')}) FROM stdin;\n`);
      let count = 0;
      let chunk = '';
      for (const row of statement.iterate() as Iterable<unknown[]>) {
        const fields = new Array<string>(columns.length);
        for (let i = 0; i < columns.length; i += 1) {
          try {
            const value = row[i];
            const text = typeof value === 'string' && value.includes('\uFFFD') ? bytesOf(columns[i]!.name, row[columns.length]) : value;
            fields[i] = sqliteToCopyField(columns[i]!.kind, text);
          } catch (error) {
            if (!(error instanceof ValueRefused)) throw error;
            throw new LicenseServerError(
              'BACKUP_NOT_PORTABLE',
              `the backup cannot be moved to PostgreSQL: table ${table.name}, ${rowName(columns, row)}, column ${columns[i]!.name} ${error.message}; nothing was changed`,
            );
          }
        }
        chunk += `${fields.join('\t')}\n`;
        count += 1;
        if (chunk.length >= CHUNK) {
          await write(out, chunk);
          chunk = '';
        }
      }
      await write(out, `${chunk}\\.\n\n`);
      rows[table.name] = count;
    }
    await write(out, "SELECT setval(pg_get_serial_sequence('audit_log', 'id'), coalesce(max(id), 1), max(id) IS NOT NULL) FROM audit_log;\n");
    out.end();
    await finished(out);
    return { schemaVersion, rows };
  } catch (error) {
    out.destroy();
    throw error;
  } finally {
    source.close();
  }
}

const CHUNK = 1024 * 1024;

function write(out: WriteStream, text: string): Promise<void> {
  return new Promise((resolve, reject) => out.write(text, (error) => (error ? reject(error) : resolve())));
}
