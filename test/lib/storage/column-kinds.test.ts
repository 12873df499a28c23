import assert from 'node:assert/strict';
import { COLUMN_KINDS, type ColumnKind } from '../../../src/lib/storage/column-kinds.js';
import { TABLES } from '../../../src/lib/storage/migrations.js';
import { forEachEngine } from '../../support/engines.js';

/** The column types each kind is written as by the migrations (migrations.ts, `T`). */
const TYPES: Record<ColumnKind, { sqlite: string; postgres: readonly string[] }> = {
  uuid: { sqlite: 'TEXT', postgres: ['uuid'] },
  text: { sqlite: 'TEXT', postgres: ['text'] },
  timestamp: { sqlite: 'TEXT', postgres: ['timestamp with time zone'] },
  boolean: { sqlite: 'INTEGER', postgres: ['boolean'] },
  bytes: { sqlite: 'BLOB', postgres: ['bytea'] },
  integer: { sqlite: 'INTEGER', postgres: ['bigint', 'integer'] },
  json: { sqlite: 'TEXT', postgres: ['jsonb'] },
};

// A cross-engine restore converts by kind: a column missing here, or of another type than
// its kind says, would be moved wrongly or refused. The catalogs are the truth.
forEachEngine('column kinds', (fixture) => {
  it('name every column of every table, with the type the migrations give it', async () => {
    const db = await fixture.freshDatabase();
    assert.deepEqual(Object.keys(COLUMN_KINDS).sort(), TABLES.map((table) => table.name).sort());
    for (const table of TABLES) {
      const columns = fixture.engine === 'sqlite'
        ? (await db.query<{ name: string; type: string }>(`SELECT name, type FROM pragma_table_info('${table.name}')`)).map((row) => [row.name, row.type] as const)
        : (await db.query<{ name: string; type: string }>(
            'SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?',
            [table.name],
          )).map((row) => [row.name, row.type] as const);
      assert.deepEqual(columns.map(([name]) => name).sort(), Object.keys(COLUMN_KINDS[table.name]!).sort(), `columns of ${table.name}`);
      for (const [name, type] of columns) {
        const kind = COLUMN_KINDS[table.name]![name]!;
        const expected = fixture.engine === 'sqlite' ? [TYPES[kind].sqlite] : TYPES[kind].postgres;
        // SQLite's AUTOINCREMENT id is declared INTEGER, which the kind already says.
        assert.ok(expected.includes(type), `${table.name}.${name} is ${type}, kind ${kind} expects ${expected.join(' or ')}`);
      }
    }
  });
});
