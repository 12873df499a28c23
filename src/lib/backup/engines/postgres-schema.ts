import type pg from 'pg';
import { CREATE_TRIGRAM_EXTENSION, guardedTrigramIndex, usesTrigrams } from '../../storage/trigram-indexes.js';

/**
 * The schema of the dumped tables, read from the catalog inside the dump's snapshot and
 * split the way pg_dump splits it, so that a load is fast: tables are created bare (columns,
 * types, collations, defaults, NOT NULL, identity and CHECK constraints), the rows are
 * copied in, and only then are primary keys, unique constraints, indexes and foreign keys
 * added. Building an index once from all the rows is much cheaper than growing it row by
 * row, and a foreign key added afterwards is checked with one join instead of a trigger per
 * row. Every name is kept, since later migrations ALTER and DROP constraints by name.
 * Names are written unqualified: the dump loads into whatever schema the loader's
 * search_path makes current, as the migrations do.
 */
export interface DumpSchema {
  /** One CREATE TABLE statement per table, in the order given. */
  readonly tables: readonly string[];
  /** ALTER TABLE ... ADD CONSTRAINT (primary keys, unique), CREATE INDEX, then foreign keys. */
  readonly constraints: readonly string[];
  /** setval() calls that put each identity sequence where it is in the source. */
  readonly sequences: readonly string[];
}

interface ColumnRow {
  name: string;
  type: string;
  not_null: boolean;
  default_expr: string | null;
  identity: '' | 'a' | 'd';
  collation: string | null;
  generated: '' | 's';
  sequence: string | null;
}

interface ConstraintRow {
  name: string;
  kind: string;
  definition: string;
  validated: boolean;
}

export async function readDumpSchema(client: pg.Client, tables: readonly string[]): Promise<DumpSchema> {
  const creates: string[] = [];
  const keys: string[] = [];
  const indexes: string[] = [];
  const foreign: string[] = [];
  const late: string[] = [];
  const sequences: string[] = [];
  for (const table of tables) {
    const relation = quoteIdent(table);
    const columns = (await client.query<ColumnRow>(COLUMNS_SQL, [relation])).rows;
    const constraints = (await client.query<ConstraintRow>(CONSTRAINTS_SQL, [relation])).rows;
    const lines: string[] = [];
    for (const column of columns) lines.push(`    ${await columnDefinition(client, column)}`);
    for (const check of constraints.filter((row) => row.kind === 'c' && row.validated)) {
      lines.push(`    CONSTRAINT ${quoteIdent(check.name)} ${check.definition}`);
    }
    creates.push(`CREATE TABLE ${relation} (\n${lines.join(',\n')}\n);`);
    for (const constraint of constraints) {
      const statement = `ALTER TABLE ONLY ${relation} ADD CONSTRAINT ${quoteIdent(constraint.name)} ${constraint.definition};`;
      if (constraint.kind === 'f') foreign.push(statement);
      else if (constraint.kind === 'c' && !constraint.validated) late.push(statement);
      else if (constraint.kind !== 'c') keys.push(statement);
    }
    for (const index of (await client.query<{ definition: string; qualified: string }>(INDEXES_SQL, [relation])).rows) {
      // pg_get_indexdef always qualifies the table; the rest of the dump does not.
      const unqualified = index.definition.replace(` ON ${index.qualified} USING `, ` ON ${relation} USING `);
      if (unqualified === index.definition) throw new Error(`unexpected index definition: ${index.definition}`);
      // pg_trgm may be missing where the dump loads (a scratch database, another server):
      // the search's trigram indexes are then left out rather than failing the load.
      if (!usesTrigrams(unqualified)) indexes.push(`${unqualified};`);
      else {
        if (!indexes.includes(`${CREATE_TRIGRAM_EXTENSION};`)) indexes.push(`${CREATE_TRIGRAM_EXTENSION};`);
        indexes.push(`${guardedTrigramIndex(unqualified)};`);
      }
    }
    for (const column of columns.filter((row) => row.sequence !== null)) {
      const state = (await client.query<{ last_value: string; is_called: boolean }>(`SELECT last_value::text, is_called FROM ${column.sequence!}`)).rows[0]!;
      sequences.push(
        `SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence('${relation.replace(/'/g, "''")}', '${column.name.replace(/'/g, "''")}'), ${state.last_value}, ${state.is_called});`,
      );
    }
  }
  return { tables: creates, constraints: [...keys, ...indexes, ...foreign, ...late], sequences };
}

async function columnDefinition(client: pg.Client, column: ColumnRow): Promise<string> {
  let text = `${quoteIdent(column.name)} ${column.type}`;
  if (column.collation) text += ` COLLATE ${column.collation}`;
  if (column.generated === 's') text += ` GENERATED ALWAYS AS (${column.default_expr}) STORED`;
  else if (column.default_expr !== null) text += ` DEFAULT ${column.default_expr}`;
  if (column.not_null) text += ' NOT NULL';
  if (column.identity) {
    const options = (await client.query<Record<string, string>>(SEQUENCE_SQL, [column.sequence])).rows[0]!;
    text +=
      ` GENERATED ${column.identity === 'a' ? 'ALWAYS' : 'BY DEFAULT'} AS IDENTITY (SEQUENCE NAME ${options.name} START WITH ${options.start}` +
      ` INCREMENT BY ${options.increment} MINVALUE ${options.min} MAXVALUE ${options.max} CACHE ${options.cache}${options.cycle ? ' CYCLE' : ' NO CYCLE'})`;
  }
  return text;
}

export function quoteIdent(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

// $1 is a quoted table name, resolved through the search_path like every name in the dump.
const COLUMNS_SQL = `
  SELECT a.attname AS name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
         pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS default_expr, a.attidentity AS identity, a.attgenerated AS generated,
         CASE WHEN a.attcollation <> t.typcollation
           THEN (SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.collname)
                 FROM pg_catalog.pg_collation c JOIN pg_catalog.pg_namespace n ON n.oid = c.collnamespace WHERE c.oid = a.attcollation)
         END AS collation,
         pg_catalog.pg_get_serial_sequence($1, a.attname) AS sequence
  FROM pg_catalog.pg_attribute a
  JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
  ORDER BY a.attnum`;

// Ordered by name, so that a dump of the same schema is the same text.
const CONSTRAINTS_SQL = `
  SELECT conname AS name, contype AS kind, pg_catalog.pg_get_constraintdef(oid) AS definition, convalidated AS validated
  FROM pg_catalog.pg_constraint WHERE conrelid = $1::regclass
  ORDER BY CASE contype WHEN 'p' THEN 0 WHEN 'u' THEN 1 ELSE 2 END, conname`;

// Indexes of their own; those behind a primary key or unique constraint come with it.
const INDEXES_SQL = `
  SELECT pg_catalog.pg_get_indexdef(i.indexrelid) AS definition,
         pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) AS qualified
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
  WHERE i.indrelid = $1::regclass
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conrelid = i.indrelid AND k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x'))
  ORDER BY ic.relname`;

const SEQUENCE_SQL = `
  SELECT pg_catalog.quote_ident(c.relname) AS name, s.seqstart AS start, s.seqincrement AS increment, s.seqmin AS min,
         s.seqmax AS max, s.seqcache AS cache, s.seqcycle AS cycle
  FROM pg_catalog.pg_sequence s JOIN pg_catalog.pg_class c ON c.oid = s.seqrelid
  WHERE s.seqrelid = $1::regclass`;
