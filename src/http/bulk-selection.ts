import type { SelectionParser } from '../lib/bulk/selection.js';
import { LicenseServerError } from '../lib/errors.js';
import { describe } from '../lib/validate.js';
import { expectQuery } from './fields.js';
import { LICENSE_FILTER_QUERY, MACHINE_FILTER_QUERY, parseLicenseFilters, parseMachineFilters } from './list-filters.js';

/**
 * A bulk job's filter is the list's query parameters as a JSON object, read by the list
 * routes' own parser: `{"active": "true"}` selects what `GET /api/licenses?active=true`
 * lists. The daemon's runner reads a stored job's filter with this same function.
 */
export const bulkSelection: SelectionParser = (target, filter) => {
  const query = new URLSearchParams(Object.entries(filter));
  return target === 'licenses'
    ? { target, conditions: parseLicenseFilters(expectQuery(query, LICENSE_FILTER_QUERY)) }
    : { target, conditions: parseMachineFilters(expectQuery(query, MACHINE_FILTER_QUERY)) };
};

/** The body's `filter`: an object of strings (the values a query string would carry); `{}` when left out. */
export function asFilter(value: unknown): Record<string, string> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new LicenseServerError('INVALID_INPUT', 'filter must be an object of the list\'s query parameters, such as {"active": "true"}');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > 50) throw new LicenseServerError('INVALID_INPUT', 'filter has more members than any list takes');
  for (const [name, member] of entries) {
    if (typeof member !== 'string') {
      throw new LicenseServerError('INVALID_INPUT', `filter member ${describe(name)} must be a string, as in a query string ("true", not true)`);
    }
  }
  return Object.fromEntries(entries) as Record<string, string>;
}
