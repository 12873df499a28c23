import assert from 'node:assert/strict';
import { search, type SearchKind, type SearchSource } from '../../src/lib/search/search.js';
import type { Database, Queryable, Row, SqlValue } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';
import { explain, fillStore, planProblems, type FilledStore } from '../support/query-plans.js';

/**
 * Every query a search runs, recorded as it runs on a store big enough that the planners
 * prefer indexes, is planned: none may read a big table whole or sort it, and each kind of
 * match reads the index migration 15 made for it.
 */
interface Recorded {
  readonly sql: string;
  readonly params: readonly SqlValue[];
}

/** `db` with every query recorded, and every statement: the plans are made under the settings the search made. */
function recording(db: Database): { db: SearchSource; queries: Recorded[]; settings: string[] } {
  const queries: Recorded[] = [];
  const settings: string[] = [];
  const wrap = (inner: Queryable): Queryable => ({
    query: async <R extends Row = Row>(sql: string, params: readonly SqlValue[] = []) => {
      queries.push({ sql, params });
      return inner.query<R>(sql, params);
    },
    execute: async (sql, params) => {
      settings.push(sql);
      return inner.execute(sql, params);
    },
  });
  return {
    queries,
    settings,
    db: { engine: db.engine, ...wrap(db), transaction: (fn, options) => db.transaction((tx) => fn(wrap(tx)), options) },
  };
}

interface PlanCase {
  readonly name: string;
  readonly query: (store: FilledStore, keys: string[]) => string;
  readonly kinds: readonly SearchKind[];
  /** A piece of the plan that each engine's plan must hold: the index (or FTS table) that answers. */
  readonly reads: { readonly sqlite: readonly string[]; readonly postgres: readonly string[] };
}

const cases: PlanCase[] = [
  {
    name: 'a license key prefix',
    query: (_store, keys) => keys[5]!.slice(0, 6).replace(/-/g, ''),
    kinds: ['licenses'],
    reads: { sqlite: ['sqlite_autoindex_licenses_2'], postgres: ['licenses_license_key_key'] },
  },
  {
    name: 'a whole license key',
    query: (_store, keys) => keys[5]!.toLowerCase(),
    kinds: ['licenses'],
    reads: { sqlite: ['sqlite_autoindex_licenses_2'], postgres: ['licenses_license_key_key'] },
  },
  {
    name: 'a substring of a customer name or email',
    query: () => 'tomer 123',
    kinds: ['customers'],
    reads: { sqlite: ['VIRTUAL TABLE'], postgres: ['customers_name_trigrams', 'customers_email_trigrams'] },
  },
  {
    name: 'the start of a customer name or email (under 3 characters)',
    query: () => 'zo',
    kinds: ['customers'],
    reads: { sqlite: ['customers_name_folded', 'customers_email_folded'], postgres: ['customers_name_folded', 'customers_email_folded'] },
  },
  {
    name: 'a hardware ID prefix or machine name',
    query: () => 'hw-1999',
    kinds: ['machines'],
    reads: { sqlite: ['machines_hardware_id', 'machines_name_folded'], postgres: ['machines_hardware_id', 'machines_name_folded'] },
  },
  {
    name: 'a customer id (every kind by id)',
    query: (store) => store.customerIds[7]!,
    kinds: ['licenses', 'customers', 'machines', 'entitlements', 'admin_tokens', 'audit_entries', 'notification_deliveries'],
    reads: { sqlite: ['audit_log_entity_id_occurred'], postgres: ['audit_log_entity_id_occurred'] },
  },
];

forEachEngine('search query plans', (fixture) => {
  let db: Database;
  let store: FilledStore;
  let keys: string[];

  before(async function () {
    this.timeout(180_000);
    db = await fixture.freshDatabase();
    store = await fillStore(db);
    // Keys in the stored format, as the prefix ranges expect (fillStore's keys are not).
    const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
    keys = store.licenseIds.slice(0, 20).map((_, i) => Array.from({ length: 7 }, (_g, g) => Array.from({ length: 4 }, (_s, s) => alphabet[(i * 7 + g * 3 + s * 5) % 32]).join('')).join('-'));
    for (const [i, key] of keys.entries()) await db.execute('UPDATE licenses SET license_key = ? WHERE id = ?', [key, store.licenseIds[i]!]);
    await db.execute(`UPDATE customers SET email = 'c' || substr(CAST(id AS TEXT), 1, 8) || '@example.com'`);
    // One customer whose name starts otherwise than every other's, for a short query to find.
    await db.execute(`UPDATE customers SET name = 'Zorro Ltd' WHERE id = ?`, [store.customerIds[11]!]);
    if (fixture.engine === 'postgres') await db.execute('ANALYZE');
  });

  const statistics = fixture.engine === 'sqlite' ? (['no statistics (as the app leaves a store)', 'after ANALYZE'] as const) : (['statistics'] as const);
  for (const state of statistics) {
    describe(state, () => {
      if (state === 'after ANALYZE') before(async () => db.execute('ANALYZE'));
      for (const planCase of cases) {
        it(`${planCase.name}: read through indexes, nothing scanned or sorted`, async () => {
          const recorder = recording(db);
          const q = planCase.query(store, keys);
          const found = await search(recorder.db, q, { kinds: planCase.kinds });
          assert.ok(recorder.queries.length > 0);
          const plans: string[] = [];
          const failures: string[] = [];
          // Planned as the search ran them: in a transaction with its settings (SET LOCAL).
          const plansOf = (fn: (on: Queryable & { engine: Database['engine'] }) => Promise<void>) => fixture.engine === 'postgres'
            ? db.transaction(async (tx) => {
                for (const setting of recorder.settings) await tx.execute(setting);
                await fn({ ...tx, query: tx.query.bind(tx), execute: tx.execute.bind(tx), engine: db.engine });
              })
            : fn(db);
          await plansOf(async (on) => { for (const query of recorder.queries) {
            const plan = await explain(on, query.sql, query.params);
            plans.push(...plan);
            const problems = planProblems(fixture.engine, plan);
            if (problems.length > 0) failures.push(`${query.sql.replace(/\s+/g, ' ')}: ${problems.join('; ')}\n    plan: ${plan.join(' | ')}`);
          } });
          for (const index of planCase.reads[fixture.engine]) {
            if (!plans.some((line) => line.includes(index))) failures.push(`no plan reads ${index}:\n    ${plans.join(' | ')}`);
          }
          assert.deepEqual(failures, []);
          // The search found what the case is about: a plan of a query that finds nothing proves little.
          assert.ok(planCase.kinds.some((kind) => (found[kind]?.items.length ?? 0) > 0), JSON.stringify(found));
        });
      }
    });
  }

  it('flags a customer search that reads the table whole (the check can fail)', async () => {
    const plan = await explain(db, "SELECT id FROM customers c WHERE lower(c.name) LIKE '%tomer 1%' LIMIT 11", []);
    assert.notDeepEqual(planProblems(fixture.engine, plan), [], plan.join(' | '));
  });
});
