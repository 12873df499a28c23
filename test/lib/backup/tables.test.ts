import assert from 'node:assert/strict';
import { DERIVED_TABLES, TABLES } from '../../../src/lib/storage/migrations.js';
import { forEachEngine } from '../../support/engines.js';

forEachEngine('backup table list', (fixture) => {
  it('names every table the migrations create, parents before children', async () => {
    const db = await fixture.freshDatabase();
    const rows = fixture.engine === 'sqlite'
      ? await db.query<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
      : await db.query<{ name: string }>('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()');
    // The search's FTS5 table and its shadow tables (customer_search_data, ...) are derived, not dumped.
    const derived = (name: string) => DERIVED_TABLES.some((table) => name === table || name.startsWith(`${table}_`));
    if (fixture.engine === 'sqlite') assert.ok(rows.some((row) => DERIVED_TABLES.includes(row.name)), 'the search table exists');
    assert.deepEqual(rows.map((row) => row.name).filter((name) => !derived(name)).sort(), TABLES.map((table) => table.name).sort());
    const position = new Map(TABLES.map((table, i) => [table.name, i]));
    const references = fixture.engine === 'sqlite'
      ? (await Promise.all(TABLES.map(async (table) =>
          (await db.query<{ table: string }>(`SELECT "table" FROM pragma_foreign_key_list('${table.name}')`)).map((row) => [table.name, row.table] as const))))
          .flat()
      : (await db.query<{ child: string; parent: string }>(
          `SELECT tc.table_name AS child, ccu.table_name AS parent FROM information_schema.table_constraints tc
           JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = tc.constraint_name
           WHERE tc.constraint_type = 'FOREIGN KEY'`,
        )).map((row) => [row.child, row.parent] as const);
    assert.ok(references.length > 0);
    for (const [child, parent] of references) assert.ok(position.get(parent)! < position.get(child)!, `${parent} before ${child}`);
  });
});
