import { LicenseServerError } from '../lib/errors.js';
import type { ListPage, Page } from '../lib/paging.js';
import { describe } from '../lib/validate.js';

/**
 * Refuses members a route does not know (a typo such as "ttl_day" must not silently fall
 * back to a default) and members it needs that are missing. Types are checked by the core,
 * which also serves the command line.
 */
export function expectFields(body: Record<string, unknown>, required: readonly string[], optional: readonly string[] = []): void {
  for (const name of Object.keys(body)) {
    if (!required.includes(name) && !optional.includes(name)) {
      throw new LicenseServerError('INVALID_INPUT', `unknown field ${describe(name)}; expected ${[...required, ...optional].join(', ') || 'no members'}`);
    }
  }
  for (const name of required) {
    if (!(name in body)) throw new LicenseServerError('INVALID_INPUT', `missing field "${name}"`);
  }
}

/** Query parameters, each at most once, only the known ones. */
export function expectQuery(query: URLSearchParams, known: readonly string[]): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const name of new Set(query.keys())) {
    if (!known.includes(name)) {
      throw new LicenseServerError('INVALID_INPUT', `unknown query parameter ${describe(name)}; expected ${known.join(', ') || 'none'}`);
    }
    const values = query.getAll(name);
    if (values.length > 1) throw new LicenseServerError('INVALID_INPUT', `query parameter "${name}" is given more than once`);
    out[name] = values[0];
  }
  return out;
}

export function queryInteger(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,9}$/.test(value)) throw new LicenseServerError('INVALID_INPUT', `query parameter "${name}" must be a non-negative integer`);
  return Number(value);
}

export function queryBoolean(value: string | undefined, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new LicenseServerError('INVALID_INPUT', `query parameter "${name}" must be true or false`);
}

/** A body member the core expects as text; its content is checked there. */
export function asString(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new LicenseServerError('INVALID_INPUT', `${name} must be a string`);
  return value;
}

/** The parameters every list route takes: paging (`limit`, `offset`, `cursor`) and `format` (json or csv: list-reply.ts). */
export const PAGING_QUERY = ['limit', 'offset', 'cursor', 'format'] as const;

/**
 * The largest page the HTTP API answers. The command line keeps MAX_LIST_LIMIT: it runs in
 * a process of its own. The daemon builds and serialises a page on the thread that answers
 * client validations, and a 10,000-license page held it for 60-90 ms at a time (issue 24:
 * validation p99 beside two connections asking for such pages doubled on PostgreSQL), which
 * no pool or reader thread can take away; 1,000 rows hold it for a tenth of that.
 */
export const HTTP_MAX_LIST_LIMIT = 1_000;

export function queryPage(q: Record<string, string | undefined>): Page {
  const limit = queryInteger(q.limit, 'limit');
  if (limit !== undefined && (limit < 1 || limit > HTTP_MAX_LIST_LIMIT)) {
    throw new LicenseServerError('INVALID_INPUT', `limit must be an integer from 1 to ${HTTP_MAX_LIST_LIMIT}, got ${limit}; ask for the next page by its cursor (the Link header)`);
  }
  return {
    ...(limit === undefined ? {} : { limit }),
    ...(q.offset === undefined ? {} : { offset: queryInteger(q.offset, 'offset')! }),
    ...(q.cursor === undefined ? {} : { cursor: q.cursor }),
  };
}

/**
 * A list's reply: the page as a JSON array (as before cursors), and when more rows follow a
 * `Link: <path?...>; rel="next"` header (RFC 8288) with the request's own filters and limit
 * and the next cursor in place of any offset or earlier cursor.
 */
export function pageReply(path: string, query: URLSearchParams, page: ListPage<unknown>, shape: (items: unknown[]) => unknown = (items) => items): {
  json: unknown;
  headers?: Record<string, string>;
} {
  if (page.next_cursor === null) return { json: shape(page.items) };
  const next = new URLSearchParams();
  for (const [name, value] of query) if (name !== 'offset' && name !== 'cursor') next.append(name, value);
  next.set('cursor', page.next_cursor);
  return { json: shape(page.items), headers: { Link: `<${path}?${next.toString()}>; rel="next"` } };
}
