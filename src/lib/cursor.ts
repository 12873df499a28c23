import { createHash } from 'node:crypto';
import { LicenseServerError } from './errors.js';
import { isUuid } from './validate.js';

/**
 * Opaque page cursors. A cursor names the list it belongs to, a fingerprint of the filters
 * it was made with, and the keyset position after which the next page starts (the sort key
 * values and the id of the last row shown). It is base64url JSON: not secret, since every
 * value in it is bound as a query parameter and checked for its kind here, but opaque to
 * clients, who must pass it back unchanged. Binding it to the list and filters turns a
 * cursor pasted into the wrong request into a clear error instead of a silently wrong page.
 */

/** How a key value is checked when a cursor comes back: it reaches SQL as a bound value. */
export type KeyKind = 'timestamp' | 'uuid' | 'integer' | 'text';

export interface SortKey {
  /** The column as the list's SQL names it, e.g. `l.created_at`. */
  readonly column: string;
  /** The same value's name in a result row, e.g. `created_at`. */
  readonly field: string;
  readonly kind: KeyKind;
}

/** A list's order: its keys, the last one unique, all in one direction. */
export interface Keyset {
  /** Which list a cursor belongs to, e.g. `licenses`. */
  readonly list: string;
  readonly keys: readonly SortKey[];
  readonly descending?: boolean;
}

/** The filters a list was asked with, by name; undefined means not given. */
export type ListFilters = Readonly<Record<string, string | number | boolean | null | undefined>>;

export type KeyValue = string | number;

const FORMAT = 1;
const MAX_CURSOR_LENGTH = 2_000;
const MAX_TEXT_KEY = 500;
// Enough of a bad cursor for its owner to recognise it, never the whole of what was sent.
const SHOWN_PREFIX = 12;

/** A fingerprint of the filters: the same filters, in any order, give the same one. */
export function filterFingerprint(filters: ListFilters): string {
  const given = Object.entries(filters).filter(([, value]) => value !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256').update(JSON.stringify(given)).digest('base64url').slice(0, 16);
}

export function encodeCursor(keyset: Keyset, filters: ListFilters, position: readonly KeyValue[]): string {
  return Buffer.from(JSON.stringify([FORMAT, keyset.list, filterFingerprint(filters), ...position]), 'utf8').toString('base64url');
}

/** The position a cursor holds, checked against the list and filters it is used with. */
export function decodeCursor(cursor: string, keyset: Keyset, filters: ListFilters): KeyValue[] {
  const shown = `"${cursor.slice(0, SHOWN_PREFIX).replace(/[^A-Za-z0-9_-]/g, '?')}${cursor.length > SHOWN_PREFIX ? '...' : ''}"`;
  const invalid = (why: string) => new LicenseServerError('INVALID_INPUT', `cursor ${shown} ${why}`);
  const unusable = invalid('is not a cursor this server made; pass the cursor of a previous page unchanged');
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw unusable;
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw unusable;
  }
  if (!Array.isArray(decoded) || decoded[0] !== FORMAT || typeof decoded[1] !== 'string' || typeof decoded[2] !== 'string') throw unusable;
  const [, list, fingerprint, ...position] = decoded as [number, string, string, ...unknown[]];
  if (list !== keyset.list) {
    throw invalid(`belongs to another list${/^[a-z_]{1,40}$/.test(list) ? ` (${list})` : ''}, not to ${keyset.list}`);
  }
  if (fingerprint !== filterFingerprint(filters)) {
    throw invalid(`was made with other filters; ask for the next page with the same filters as the page that gave it (only the limit may change)`);
  }
  if (position.length !== keyset.keys.length || !position.every((value, i) => fitsKind(value, keyset.keys[i]!.kind))) throw unusable;
  return position as KeyValue[];
}

/** The key values of a result row, as a cursor holds them. */
export function positionOf(keyset: Keyset, row: Readonly<Record<string, unknown>>): KeyValue[] {
  return keyset.keys.map(({ field, kind }) => {
    const value = row[field];
    if (kind === 'integer') return Number(value);
    // PostgreSQL gives a Date (its values are written with milliseconds, as JavaScript
    // keeps them); SQLite gives back the text stored, which is kept as it is so that the
    // next page compares with exactly what the index holds.
    if (value instanceof Date) return value.toISOString();
    return String(value);
  });
}

function fitsKind(value: unknown, kind: KeyKind): boolean {
  switch (kind) {
    case 'integer':
      return typeof value === 'number' && Number.isSafeInteger(value);
    case 'uuid':
      return typeof value === 'string' && isUuid(value);
    case 'timestamp':
      return typeof value === 'string' && value.length <= 40 && /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}/.test(value) && !Number.isNaN(Date.parse(value));
    case 'text':
      return typeof value === 'string' && value.length <= MAX_TEXT_KEY;
  }
}
