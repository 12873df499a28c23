import { decodeCursor, encodeCursor, positionOf, type Keyset, type ListFilters } from './cursor.js';
import { LicenseServerError } from './errors.js';
import type { Queryable, Row, SqlValue } from './storage/types.js';

export const MAX_LIST_LIMIT = 10_000;
export const DEFAULT_LIST_LIMIT = 100;
/**
 * OFFSET makes the engine walk every skipped row: at a million licenses a page 900k rows in
 * took seconds and held the SQLite thread. Deeper pages are for the cursor, which costs the
 * same at any depth.
 */
export const MAX_LIST_OFFSET = 10_000;

/** Validates a page size; used by every list operation. */
export function checkLimit(limit: number): number {
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new LicenseServerError('INVALID_INPUT', `limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${limit}`);
  }
  return limit;
}

export function checkOffset(offset: number): number {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new LicenseServerError('INVALID_INPUT', `offset must be a non-negative integer, got ${offset}`);
  }
  if (offset > MAX_LIST_OFFSET) {
    throw new LicenseServerError('INVALID_INPUT', `offset may be at most ${MAX_LIST_OFFSET}, got ${offset}; page deeper with the cursor each page gives for the next one`);
  }
  return offset;
}

function checkOnePosition(page: Page): void {
  if (page.cursor !== undefined && page.offset !== undefined) {
    throw new LicenseServerError('INVALID_INPUT', 'give either a cursor or an offset, not both');
  }
}

/**
 * A page of a list: at most `limit` items (100 when left out), after the first `offset` or
 * after the row a `cursor` from the previous page names (never both).
 */
export interface Page {
  readonly limit?: number;
  readonly offset?: number;
  readonly cursor?: string;
}

/** One page and, when more rows follow, the cursor of the page after it. */
export interface ListPage<T> {
  readonly items: T[];
  readonly next_cursor: string | null;
}

/** The SQL of one page of a list, and what is needed to turn its rows into a ListPage. */
export interface PageQuery {
  readonly sql: string;
  readonly params: SqlValue[];
  readonly keyset: Keyset;
  readonly filters: ListFilters;
  /** Rows asked for beyond the page: 1 (to know whether a next page exists), or 0 for a whole list. */
  readonly limit: number | undefined;
}

/**
 * Builds a keyset-paged query: `where` (the filters, already with their params) plus the
 * cursor's position as a row-value comparison, which both engines answer from an index on
 * the sort keys, ordered by those keys and limited to one row more than the page.
 * `whole: true` lists everything when no page is asked for (for callers inside the core).
 */
export function pageQuery(
  select: string,
  where: readonly string[],
  params: readonly SqlValue[],
  keyset: Keyset,
  filters: ListFilters,
  page: Page = {},
  options: { readonly whole?: boolean } = {},
): PageQuery {
  checkOnePosition(page);
  const conditions = [...where];
  const allParams = [...params];
  if (page.cursor !== undefined) {
    const position = decodeCursor(page.cursor, keyset, filters);
    const columns = keyset.keys.map((key) => key.column);
    const marks = columns.map(() => '?');
    const comparison = keyset.descending ? '<' : '>';
    conditions.push(columns.length === 1 ? `${columns[0]} ${comparison} ?` : `(${columns.join(', ')}) ${comparison} (${marks.join(', ')})`);
    allParams.push(...position);
  }
  const order = keyset.keys.map((key) => `${key.column}${keyset.descending ? ' DESC' : ''}`).join(', ');
  const whole = options.whole === true && page.limit === undefined && page.offset === undefined && page.cursor === undefined;
  const limit = whole ? undefined : checkLimit(page.limit ?? DEFAULT_LIST_LIMIT);
  const offset = page.offset === undefined ? 0 : checkOffset(page.offset);
  const tail = limit === undefined ? '' : ` LIMIT ${limit + 1}${offset > 0 ? ` OFFSET ${offset}` : ''}`;
  const sql = `${select}${conditions.length ? ` WHERE ${conditions.join(' AND ')}` : ''} ORDER BY ${order}${tail}`;
  return { sql, params: allParams, keyset, filters, limit };
}

/** The page's rows (the extra one dropped) and the cursor of the next page, if there is one. */
export function pageRows(query: PageQuery, rows: readonly Row[]): { rows: Row[]; next_cursor: string | null } {
  if (query.limit === undefined || rows.length <= query.limit) return { rows: [...rows], next_cursor: null };
  const shown = rows.slice(0, query.limit);
  return { rows: shown, next_cursor: encodeCursor(query.keyset, query.filters, positionOf(query.keyset, shown.at(-1)!)) };
}

/** Runs a page's query and turns its rows into items: what every list's *Page function does. */
export async function fetchPage<T>(db: Queryable, query: PageQuery, toItem: (row: Row) => T): Promise<ListPage<T>> {
  const page = pageRows(query, await db.query(query.sql, query.params));
  return { items: page.rows.map(toItem), next_cursor: page.next_cursor };
}

/**
 * The same paging over a list already in memory, sorted by the keyset (backup files):
 * the cursor names the last item shown by its sort key values.
 */
export function pageOf<T extends object>(items: readonly T[], keyset: Keyset, filters: ListFilters, page: Page = {}): ListPage<T> {
  checkOnePosition(page);
  const limit = checkLimit(page.limit ?? DEFAULT_LIST_LIMIT);
  let start = page.offset === undefined ? 0 : checkOffset(page.offset);
  if (page.cursor !== undefined) {
    const position = decodeCursor(page.cursor, keyset, filters);
    const after = (item: T) => {
      const values = positionOf(keyset, item as Readonly<Record<string, unknown>>);
      for (let i = 0; i < values.length; i += 1) {
        if (values[i] === position[i]) continue;
        const greater = values[i]! > position[i]!;
        return keyset.descending ? !greater : greater;
      }
      return false;
    };
    start = items.findIndex(after);
    if (start < 0) start = items.length;
  }
  const shown = items.slice(start, start + limit);
  const more = start + limit < items.length;
  return { items: shown, next_cursor: more ? encodeCursor(keyset, filters, positionOf(keyset, shown.at(-1) as Readonly<Record<string, unknown>>)) : null };
}

/**
 * A filter column compared through an expression, which no index serves. Where a list has a
 * filter that picks out a few rows (a customer's licenses, one entity's audit entries), the
 * other filters are written this way so that SQLite reads the selective index: without
 * statistics (the app never runs ANALYZE) it took `action`'s index for an entity's checkouts
 * and walked every checkout in the log (`license show` 1.7 s at 10M audit rows, 2 ms after).
 */
export function unindexedText(column: string): string {
  return `(${column} || '')`;
}

export function unindexedBoolean(column: string): string {
  return `(${column} AND TRUE)`;
}

/** The same for a timestamp column (both engines keep its type through COALESCE). */
export function unindexedTime(column: string): string {
  return `COALESCE(${column}, ${column})`;
}

/** How many rows a list's filter selects (GET /api/licenses/count and the like). */
export interface ListCount {
  /** Exact when `exact`; otherwise COUNT_BOUND: at least that many. */
  readonly count: number;
  readonly exact: boolean;
}

/**
 * Counts stop here. Counting costs about as much as reading the rows counted: a count of a
 * million licenses took 0.3-1.5 s (bench, size L), long enough to hold an admin connection and
 * SQLite's reader thread. Up to COUNT_BOUND a count is exact; past it the answer is
 * "at least COUNT_BOUND", marked exact: false. A filter that selects few rows out of many
 * (`seats=full`) still reads what it must to find them: the bound caps the rows counted,
 * not the rows looked at.
 */
export const COUNT_BOUND = 10_000;

/** Counts the rows of `from` (a FROM clause with its joins) that meet `where`, up to `bound`. */
export async function countRows(db: Queryable, from: string, where: readonly string[], params: readonly SqlValue[], bound: number = COUNT_BOUND): Promise<ListCount> {
  const rows = await db.query(
    `SELECT count(*) AS n FROM (SELECT 1 AS one ${from}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} LIMIT ${bound + 1}) counted`,
    params,
  );
  const n = Number(rows[0]?.n ?? 0);
  return n > bound ? { count: bound, exact: false } : { count: n, exact: true };
}
