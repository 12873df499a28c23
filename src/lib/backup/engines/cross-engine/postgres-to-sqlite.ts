import { createReadStream } from 'node:fs';
import { LicenseServerError } from '../../../errors.js';
import { columnKind, type ColumnKind } from '../../../storage/column-kinds.js';
import { MIGRATIONS, MIGRATIONS_TABLE, SCHEMA_VERSION, TABLES } from '../../../storage/migrations.js';
import { addSqlFunctions } from '../../../storage/sqlite.js';
import { loadSqliteDriver } from '../../../storage/sqlite-driver.js';
import { decodeCopyField } from './copy-text.js';
import { postgresToSqlite, ValueRefused } from './portable-values.js';
import { rowName } from './row-name.js';
import type { ConvertedTables } from './sqlite-to-postgres.js';

const COPY_START = /^COPY ([a-z_]+) \(([^)]*)\) FROM stdin;$/;
const SCHEMA_LINE = /^-- schema version (\d+)$/;

/**
 * Builds a SQLite database file from a PostgreSQL dump written by license-server
 * (docs/backup-format.md, "database/postgres.sql"), without a PostgreSQL server: the schema
 * is our migrations' SQLite side up to the dump's schema version, and the rows are read from
 * the dump's COPY blocks, converted by column kind (portable-values.ts). Statements other
 * than COPY are the dump's PostgreSQL schema and are not needed. The file is written with
 * no journal (it is new and unseen until the restore renames it into place), checked for
 * foreign keys and integrity, and synced by the caller.
 */
export async function buildSqliteFromPostgresDump(dumpFile: string, target: string): Promise<ConvertedTables> {
  const Database = loadSqliteDriver();
  const db = new Database(target);
  const rows: Record<string, number> = {};
  let schemaVersion = 0;
  let line = 0;
  try {
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    // Random UUID keys land all over their indexes; a 64 MiB page cache keeps those of a
    // million licenses in memory instead of re-reading pages for every row.
    db.pragma('cache_size = -65536');
    addSqlFunctions(db);
    let block: CopyBlock | undefined;
    const seen = new Set<string>();
    db.exec('BEGIN');
    for await (const text of lines(dumpFile)) {
      line += 1;
      if (block) {
        if (text === '\\.') {
          rows[block.table] = block.count;
          block = undefined;
        } else {
          block.insert(text, line);
        }
        continue;
      }
      if (schemaVersion === 0) {
        const version = SCHEMA_LINE.exec(text);
        if (version) {
          schemaVersion = Number(version[1]);
          if (schemaVersion < 1 || schemaVersion > SCHEMA_VERSION) {
            throw new LicenseServerError('BACKUP_UNSUPPORTED', `the backup's PostgreSQL dump has schema version ${schemaVersion}; this license-server knows versions up to ${SCHEMA_VERSION}`);
          }
          createSchema(db, schemaVersion);
        }
        continue;
      }
      const copy = COPY_START.exec(text);
      if (!copy) continue;
      const table = copy[1]!;
      if (seen.has(table) || !TABLES.some((known) => known.name === table && known.since <= schemaVersion)) {
        throw corrupt(`line ${line} copies rows into ${seen.has(table) ? 'a table copied before' : 'an unknown table'} ${table}`);
      }
      seen.add(table);
      block = new CopyBlock(db, table, copy[2]!.split(', ').map((column) => column.replace(/^"|"$/g, '')));
    }
    if (schemaVersion === 0) throw corrupt('the PostgreSQL dump has no "-- schema version" line');
    if (block) throw corrupt('the PostgreSQL dump ends inside a COPY block');
    const missing = TABLES.filter((table) => table.since <= schemaVersion && !seen.has(table.name));
    if (missing.length > 0) throw corrupt(`the PostgreSQL dump has no rows block for ${missing.map((table) => table.name).join(', ')}`);
    const recorded = Number((db.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null }).version ?? 0);
    if (recorded !== schemaVersion) throw corrupt(`the PostgreSQL dump says schema ${schemaVersion} and its schema_migrations rows say ${recorded}`);
    const orphan = db.prepare('PRAGMA foreign_key_check').get() as { table: string; parent: string } | undefined;
    if (orphan) throw corrupt(`a row of ${orphan.table} refers to a missing row of ${orphan.parent}`);
    db.exec('COMMIT');
    const check = db.pragma('quick_check') as Array<Record<string, unknown>>;
    if (check.length !== 1 || Object.values(check[0]!)[0] !== 'ok') throw new Error(`the converted SQLite database fails quick_check: ${JSON.stringify(check).slice(0, 200)}`);
    return { schemaVersion, rows };
  } catch (error) {
    // Without a journal a rollback undoes nothing reliably; the caller deletes the file.
    if (db.inTransaction) {
      try {
        db.exec('ROLLBACK');
      } catch {
        // the file is discarded either way
      }
    }
    if (error instanceof LicenseServerError) throw error;
    const code = (error as { code?: string }).code ?? '';
    if (code.startsWith('SQLITE_CONSTRAINT')) throw corrupt(`line ${line} breaks a constraint of the schema (${(error as Error).message})`);
    throw error;
  } finally {
    db.close();
  }
}

function createSchema(db: import('better-sqlite3').Database, version: number): void {
  db.exec(MIGRATIONS_TABLE.sqlite);
  for (const migration of MIGRATIONS) {
    if (migration.version > version) break;
    for (const statement of migration.sqlite) db.exec(statement);
  }
}

/** The rows of one COPY block, inserted as they are read. */
class CopyBlock {
  count = 0;
  private readonly columns: ReadonlyArray<{ name: string; kind: ColumnKind; pk: number }>;
  private readonly statement: import('better-sqlite3').Statement;

  constructor(db: import('better-sqlite3').Database, readonly table: string, names: readonly string[]) {
    const info = new Map((db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string; pk: number }>).map((column) => [column.name, column.pk]));
    this.columns = names.map((name) => {
      const kind = columnKind(table, name);
      if (!kind || !info.has(name)) throw corrupt(`the rows of ${table} have a column ${JSON.stringify(name.slice(0, 64))} that its schema does not have`);
      return { name, kind, pk: info.get(name)! };
    });
    this.statement = db.prepare(`INSERT INTO ${table} (${names.map((name) => `"${name}"`).join(', ')}) VALUES (${names.map(() => '?').join(', ')})`);
  }

  insert(text: string, line: number): void {
    const fields = text.split('\t');
    if (fields.length !== this.columns.length) throw corrupt(`line ${line} has ${fields.length} fields where ${this.table} has ${this.columns.length} columns`);
    const values = new Array<unknown>(fields.length);
    for (let i = 0; i < fields.length; i += 1) {
      const column = this.columns[i]!;
      try {
        values[i] = postgresToSqlite(column.kind, decodeCopyField(fields[i]!));
      } catch (error) {
        if (!(error instanceof ValueRefused) && !(error instanceof TypeError)) throw error;
        const reason = error instanceof ValueRefused ? error.message : 'is not valid UTF-8';
        // The key's fields as they stand in the dump: describe() escapes whatever they hold.
        throw new LicenseServerError(
          'BACKUP_NOT_PORTABLE',
          `the backup cannot be moved to SQLite: table ${this.table}, ${rowName(this.columns, fields)} (line ${line} of the dump), column ${column.name} ${reason}; nothing was changed`,
        );
      }
    }
    this.statement.run(...values);
    this.count += 1;
  }
}

/** The dump's lines without their newline, decoded as strict UTF-8. */
async function* lines(file: string): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let rest = '';
  for await (const chunk of createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    let text: string;
    try {
      text = rest + decoder.decode(chunk as Buffer, { stream: true });
    } catch {
      throw corrupt('the PostgreSQL dump is not valid UTF-8');
    }
    let from = 0;
    for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', from)) {
      yield text.slice(from, newline);
      from = newline + 1;
    }
    rest = text.slice(from);
  }
  if (rest) yield rest;
}

function corrupt(reason: string): LicenseServerError {
  return new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${reason}`);
}
