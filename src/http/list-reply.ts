import { Readable } from 'node:stream';
import { cellText, csvRecord } from '../lib/csv.js';
import { LicenseServerError } from '../lib/errors.js';
import type { ListPage, Page } from '../lib/paging.js';
import { CSV_COLUMNS, type CsvList } from './csv-columns.js';
import { HTTP_MAX_LIST_LIMIT, pageReply, queryPage } from './fields.js';
import type { Reply, RequestContext } from './router.js';

/** Rows read per step of a CSV export that names no `limit`: the largest page the API answers. */
export const CSV_PAGE_ROWS = HTTP_MAX_LIST_LIMIT;
/** Rows turned into CSV between two turns of the event loop (as json-in-slices.ts does for JSON). */
const SLICE = 250;

export interface ListView<T> {
  /** What the token sees of a row (licenseAsSeenBy); the row itself when absent. */
  readonly row?: (item: T) => object;
  /** The JSON body around a page's rows (a bare array when absent); a CSV holds the rows alone. */
  readonly envelope?: (rows: unknown[]) => unknown;
}

/**
 * A list route's answer. As JSON: one page (pageReply, with its Link header). As CSV, asked
 * for with `?format=csv` or `Accept: text/csv`: every row of the filtered list from where
 * the request starts to its end, which is every page the JSON API would give for the same
 * query, Link after Link, one after the other. The pages are read with the list's own cursor,
 * `limit` rows at a time (1,000 by default), each turned into CSV and sent before the next is
 * read, so the list is never held whole; pages after the first wait their turn among the
 * admin reads (admin-gate.ts) as separate requests would.
 */
export async function listReply<T extends object>(
  request: Pick<RequestContext, 'query' | 'accept' | 'turn'>,
  list: CsvList,
  path: string,
  fetchPage: (page: Page) => Promise<ListPage<T>>,
  view: ListView<T> = {},
): Promise<Reply> {
  const row = view.row ?? ((item: T) => item);
  const first = queryPage(Object.fromEntries(request.query));
  if (!wantsCsv(request)) {
    const page = await fetchPage(first);
    const rows = page.items.map(row);
    return pageReply(path, request.query, { items: rows, next_cursor: page.next_cursor }, view.envelope);
  }
  const columns = seenColumns(CSV_COLUMNS[list], row);
  const limit = first.limit ?? CSV_PAGE_ROWS;
  const page = await fetchPage({ ...first, limit });
  const head = csvRecord(columns) + (await rowsAsCsv(page.items, columns, row));
  const turn = request.turn ?? (<R>(work: () => Promise<R>) => work());
  async function* body(): AsyncGenerator<Buffer> {
    yield Buffer.from(head, 'utf8');
    for (let cursor = page.next_cursor; cursor !== null;) {
      const after: string = cursor;
      const next = await turn(async () => {
        const more = await fetchPage({ limit, cursor: after });
        return { text: await rowsAsCsv(more.items, columns, row), cursor: more.next_cursor };
      });
      yield Buffer.from(next.text, 'utf8');
      cursor = next.cursor;
    }
  }
  const stamp = new Date().toISOString().replace(/[-:]|\.\d+/g, '');
  return {
    stream: Readable.from(body()),
    contentType: 'text/csv; charset=utf-8; header=present',
    headers: { 'Content-Disposition': `attachment; filename="${list}-${stamp}.csv"` },
  };
}

/** `?format=csv|json` decides; without it, an Accept header naming text/csv above application/json. */
function wantsCsv({ query, accept }: Pick<RequestContext, 'query' | 'accept'>): boolean {
  const format = query.get('format');
  if (format === 'csv') return true;
  if (format === 'json') return false;
  if (format !== null) throw new LicenseServerError('INVALID_INPUT', 'query parameter "format" must be json or csv');
  const weight = (type: string) =>
    Math.max(0, ...accept.split(',').map((range) => range.split(';').map((part) => part.trim().toLowerCase())).filter(([name]) => name === type).map(([, ...parameters]) => {
      const q = parameters.find((parameter) => parameter.startsWith('q='));
      return q === undefined ? 1 : Number(q.slice(2)) || 0;
    }));
  const csv = weight('text/csv');
  return csv > 0 && csv > weight('application/json');
}

/**
 * The columns the token sees: a view that withholds a member (a license's `key` from a `read`
 * token) withholds its column, from the header of an empty list too.
 */
function seenColumns<T>(columns: readonly string[], row: (item: T) => object): string[] {
  const seen = row(Object.fromEntries(columns.map((column) => [column, null])) as T);
  return columns.filter((column) => column in seen);
}

async function rowsAsCsv<T>(items: readonly T[], columns: readonly string[], row: (item: T) => object): Promise<string> {
  let text = '';
  for (let i = 0; i < items.length; i += SLICE) {
    if (i > 0) await new Promise((resolve) => setImmediate(resolve));
    for (const item of items.slice(i, i + SLICE)) {
      const seen = row(item) as Record<string, unknown>;
      const unknown = Object.keys(seen).find((name) => !columns.includes(name));
      // A member without a column would be dropped from the export unseen: a bug, said loudly.
      if (unknown !== undefined) throw new Error(`the CSV columns of this list lack "${unknown}" (src/http/csv-columns.ts)`);
      text += csvRecord(columns.map((column) => cellText(seen[column])));
    }
  }
  return text;
}
