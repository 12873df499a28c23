import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CSV_COLUMNS, type CsvList } from '../../src/http/csv-columns.js';

type Json = Record<string, any>;

/** Each list route and the list its CSV export is; the route set is checked against the document below. */
const LISTS: Record<string, CsvList> = {
  '/api/customers': 'customers',
  '/api/entitlements': 'entitlements',
  '/api/licenses': 'licenses',
  '/api/licenses/{id}/usage': 'license-usage',
  '/api/machines': 'machines',
  '/api/audit': 'audit',
  '/api/notifications/deliveries': 'notification-deliveries',
  '/api/backups': 'backups',
  '/api/tokens': 'tokens',
};

describe('the CSV columns of each list (src/http/csv-columns.ts)', () => {
  const document = JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as Json;
  const resolve = (node: Json): Json => (typeof node.$ref === 'string' ? resolve(node.$ref.slice(2).split('/').reduce((at: Json, part: string) => at[part], document)) : node);

  it('are the members of the rows of the JSON answer, in the order of their schema in docs/openapi.json', () => {
    const mismatches: string[] = [];
    for (const [path, list] of Object.entries(LISTS)) {
      const answer = document.paths[path].get.responses['200'].content;
      let rows = resolve(answer['application/json'].schema);
      // The backups answer an object around the rows; every form of it has the same rows.
      if (rows.oneOf) rows = resolve(rows.oneOf[0]).properties.backups;
      const members = Object.keys(resolve(rows.items).properties);
      if (JSON.stringify(members) !== JSON.stringify(CSV_COLUMNS[list])) mismatches.push(`${path}: schema ${members.join(',')}; CSV ${CSV_COLUMNS[list].join(',')}`);
    }
    assert.deepEqual(mismatches, []);
  });

  it('exist for every route the document gives a CSV answer, and for no other', () => {
    const csvRoutes = Object.entries(document.paths as Json)
      .filter(([, item]) => Object.keys(item.get?.responses['200']?.content ?? {}).some((type) => type.startsWith('text/csv')))
      .map(([path]) => path);
    assert.deepEqual(csvRoutes.sort(), Object.keys(LISTS).sort());
    assert.deepEqual(Object.values(LISTS).sort(), Object.keys(CSV_COLUMNS).sort());
  });
});
