import { encodeCursor, positionOf, type Keyset, type KeyValue } from '../cursor.js';
import { LicenseServerError } from '../errors.js';
import { licenseListQuery, type LicenseFilter } from '../licensing/licenses.js';
import { machineListQuery, type MachineFilter } from '../licensing/machines.js';
import { MAX_LIST_LIMIT, pageRows, type Page, type PageQuery } from '../paging.js';
import type { Queryable, Row } from '../storage/types.js';

/**
 * The rows a bulk job acts on: a list's filter, walked by that list's own keyset query, so
 * that the job touches exactly the rows the list shows. Both lists are ordered by an
 * immutable key, (created_at, id) and (first_seen, id), and the walk only ever moves
 * forward from the last row done to a bound fixed when the job was made. So a row is acted
 * on at most once even when the action changes what the filter looks at ("extend every
 * license expiring within 30 days" moves the licenses out of the window), and rows made
 * after the job started are left alone. Each batch reads the filter afresh: a row that
 * stopped matching before its batch came is skipped, one that started matching and sorts
 * before the bound is taken.
 */
export const BULK_TARGETS = ['licenses', 'machines'] as const;
export type BulkTarget = (typeof BULK_TARGETS)[number];

export type Selection =
  | { readonly target: 'licenses'; readonly conditions: Omit<LicenseFilter, keyof Page> }
  | { readonly target: 'machines'; readonly conditions: Omit<MachineFilter, keyof Page> };

/**
 * Turns a job's stored filter (the list's query parameters, as strings) into its conditions:
 * the list routes' own parser (http/list-filters.ts), handed in by whoever runs jobs, so that
 * a filter means in a job what it means in the list. Throws INVALID_INPUT for a bad one.
 */
export type SelectionParser = (target: BulkTarget, filter: Readonly<Record<string, string>>) => Selection;

/** Where the walk is: the keyset values of a row, as a list's cursor holds them. */
export type Position = readonly KeyValue[];

/** One page of the list, after `after` (from the start when null), evaluated at `at`. */
export function pageAfter(selection: Selection, after: Position | null, limit: number, at: Date): PageQuery {
  const first = listQuery(selection, { limit }, at);
  if (after === null) return first;
  return listQuery(selection, { limit, cursor: encodeCursor(first.keyset, first.filters, after) }, at);
}


function listQuery(selection: Selection, page: Page, at: Date): PageQuery {
  return selection.target === 'licenses'
    ? licenseListQuery({ ...selection.conditions, ...page }, at)
    : machineListQuery({ ...selection.conditions, ...page }, at);
}

/**
 * How many rows the filter selects now, and the position of the last of them: the bound of
 * a job made now. Counted a list page (MAX_LIST_LIMIT rows) at a time by the list's own
 * query, inside the database: no row leaves it but the last one of each page.
 */
export async function measureSelection(db: Queryable, selection: Selection, at: Date, chunk: number = MAX_LIST_LIMIT): Promise<{ count: number; bound: Position | null }> {
  let count = 0;
  let bound: Position | null = null;
  for (;;) {
    const query = pageAfter(selection, bound, chunk, at);
    const fields = ascendingFields(query.keyset);
    // The page query asks for one row beyond the page; it is counted here, and the next page
    // starts after it.
    const rows = await db.query(
      `SELECT ${fields.join(', ')}, count(*) OVER () AS n FROM (${query.sql}) page ORDER BY ${fields.map((field) => `${field} DESC`).join(', ')} LIMIT 1`,
      query.params,
    );
    const last = rows[0];
    if (!last) return { count, bound };
    const n = Number(last.n);
    count += n;
    bound = positionOf(query.keyset, last);
    if (n <= chunk) return { count, bound };
  }
}

/**
 * The next rows of the walk: at most `limit`, after `after`, none past `bound`. `last` when
 * the walk is over (no row follows, or the next one is past the bound).
 */
export async function rowsAfter(db: Queryable, selection: Selection, after: Position | null, bound: Position, limit: number, at: Date): Promise<{ rows: Row[]; keyset: Keyset; last: boolean }> {
  const query = pageAfter(selection, after, limit, at);
  const page = pageRows(query, await db.query(query.sql, query.params));
  const inside = page.rows.filter((row) => comparePositions(query.keyset, positionOf(query.keyset, row), bound) <= 0);
  return { rows: inside, keyset: query.keyset, last: page.next_cursor === null || inside.length < page.rows.length };
}

/** Orders two positions as the list does: timestamps by instant, ids by their text (a UUID's bytes on PostgreSQL). */
export function comparePositions(keyset: Keyset, a: Position, b: Position): number {
  for (const [i, key] of keyset.keys.entries()) {
    const [x, y] = [a[i]!, b[i]!];
    const order = key.kind === 'timestamp' ? Date.parse(String(x)) - Date.parse(String(y)) : key.kind === 'integer' ? Number(x) - Number(y) : String(x) < String(y) ? -1 : String(x) > String(y) ? 1 : 0;
    if (order !== 0) return Math.sign(order);
  }
  return 0;
}

function ascendingFields(keyset: Keyset): string[] {
  // Both lists a job walks are oldest first; a descending one would need its bound reversed.
  if (keyset.descending) throw new LicenseServerError('INTERNAL', `the ${keyset.list} list is not walked oldest first`);
  return keyset.keys.map((key) => key.field);
}
