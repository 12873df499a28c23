import { LicenseServerError } from './errors.js';

export const MAX_LIST_LIMIT = 10_000;

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
  return offset;
}

/** A page of a list: at most `limit` items after the first `offset`; all of them when both are left out. */
export interface Page {
  readonly limit?: number;
  readonly offset?: number;
}

/** `LIMIT n OFFSET m` for a page, checked (the same on both engines), or '' for the whole list. */
export function pageSql(page: Page = {}): string {
  if (page.limit === undefined && page.offset === undefined) return '';
  return `LIMIT ${checkLimit(page.limit ?? 100)} OFFSET ${checkOffset(page.offset ?? 0)}`;
}

/** The same page of a list already in memory. */
export function pageOf<T>(items: readonly T[], page: Page = {}): T[] {
  if (page.limit === undefined && page.offset === undefined) return [...items];
  const offset = checkOffset(page.offset ?? 0);
  return items.slice(offset, offset + checkLimit(page.limit ?? 100));
}
