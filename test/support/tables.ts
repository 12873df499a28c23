import { COLUMN_KINDS, type ColumnKind } from '../../src/lib/storage/column-kinds.js';
import { TABLES } from '../../src/lib/storage/migrations.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database } from '../../src/lib/storage/types.js';

/**
 * Every row of every license-server table, in one engine-neutral form, so that a SQLite
 * store and a PostgreSQL store can be compared whole: the two engines hand back the same
 * value differently (ISO text or Date, 0/1 or boolean, JSON text or parsed jsonb whose key
 * order PostgreSQL chooses), so each value is put in one form by its column's kind.
 */
export type Snapshot = Record<string, string[]>;

export async function snapshotTables(url: string): Promise<Snapshot> {
  // No migration and no create: reading a store must not change it.
  const db = await openDatabase(url, { migrate: false, create: false });
  try {
    return await snapshotOpen(db);
  } finally {
    await db.close();
  }
}

export async function snapshotOpen(db: Database): Promise<Snapshot> {
  const snapshot: Snapshot = {};
  for (const { name } of TABLES) {
    const kinds = COLUMN_KINDS[name]!;
    const rows = await db.query(`SELECT * FROM ${name}`);
    snapshot[name] = rows
      .map((row) => {
        const columns = Object.keys(row).sort();
        for (const column of columns) if (!kinds[column]) throw new Error(`${name}.${column} has no column kind`);
        return JSON.stringify(columns.map((column) => [column, normalise(kinds[column]!, row[column])]));
      })
      .sort();
  }
  return snapshot;
}

function normalise(kind: ColumnKind, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (kind) {
    case 'timestamp':
      return value instanceof Date ? value.toISOString() : new Date(String(value)).toISOString();
    case 'boolean':
      return typeof value === 'boolean' ? value : Number(value) !== 0;
    case 'integer':
      return String(value);
    case 'bytes':
      return Buffer.from(value as Uint8Array).toString('hex');
    case 'uuid':
      return String(value).toLowerCase();
    case 'json':
      return canonicalJson(typeof value === 'string' ? JSON.parse(value) : value);
    case 'text':
      if (typeof value !== 'string') throw new Error(`a text value came back as ${typeof value}`);
      return value;
  }
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The audit rows of a snapshot, by id (the one table whose rows a restore itself adds to). */
export function auditRows(snapshot: Snapshot): Array<{ id: number; action: string; row: string }> {
  return snapshot.audit_log!
    .map((row) => {
      const fields = new Map(JSON.parse(row) as Array<[string, unknown]>);
      return { id: Number(fields.get('id')), action: String(fields.get('action')), row };
    })
    .sort((a, b) => a.id - b.id);
}

/**
 * Whether `actual` is `expected`, table by table and row by row, give or take audit entries
 * of backups and restores appended after `expected` was taken (a pre-restore backup writes
 * one into the data it is about to replace; a finished restore writes one into the data it
 * put in place). Returns the first difference, or undefined.
 */
export function differenceFrom(actual: Snapshot, expected: Snapshot): string | undefined {
  for (const table of Object.keys(expected)) {
    if (table === 'audit_log') continue;
    const want = expected[table]!;
    const got = actual[table] ?? [];
    if (want.length !== got.length) return `${table}: ${got.length} rows where ${want.length} were expected`;
    for (let i = 0; i < want.length; i += 1) if (want[i] !== got[i]) return `${table}: row ${got[i]!.slice(0, 200)} where ${want[i]!.slice(0, 200)} was expected`;
  }
  const want = auditRows(expected);
  const got = auditRows(actual);
  if (got.length < want.length) return `audit_log: ${got.length} rows where at least ${want.length} were expected`;
  for (let i = 0; i < want.length; i += 1) if (want[i]!.row !== got[i]!.row) return `audit_log: row ${got[i]!.row.slice(0, 200)} where ${want[i]!.row.slice(0, 200)} was expected`;
  const extra = got.slice(want.length).find((entry) => !entry.action.startsWith('backup.'));
  if (extra) return `audit_log: an extra entry ${extra.action} (id ${extra.id})`;
  return undefined;
}
