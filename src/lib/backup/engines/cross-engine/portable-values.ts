import type { ColumnKind } from '../../../storage/column-kinds.js';
import { ISO_TIMESTAMP as CANONICAL_ISO } from '../../../storage/values.js';
import { hasLoneSurrogate, isUuid } from '../../../validate.js';
import { COPY_NULL, encodeCopyField } from './copy-text.js';

/**
 * One value in the form the other engine stores, for each column kind (storage/
 * column-kinds.ts). SQLite stores what license-server wrote (ISO-8601 text, 0/1, JSON
 * text); PostgreSQL is stricter (no NUL in text, valid UTF-8, real UUIDs, timestamps it can
 * parse, JSON without \u0000), so values are checked here, before anything is replaced, and
 * a refusal says why in words that never quote the value (it may be a secret).
 */
export class ValueRefused extends Error {}

// ISO 8601 with an explicit offset: anything else would be read in some local time zone.
const OFFSET_ISO = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}(:?\d{2})?)$/;
const REPLACEMENT = '\uFFFD';
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A SQLite value (text as a string, or as bytes when they may not be UTF-8; integers as
 * bigint) as one field of a COPY text row for PostgreSQL.
 */
export function sqliteToCopyField(kind: ColumnKind, value: unknown): string {
  if (value === null || value === undefined) return COPY_NULL;
  switch (kind) {
    case 'text':
      return encodeCopyField(textOf(value));
    case 'uuid': {
      const text = textOf(value);
      if (!isUuid(text)) throw new ValueRefused('is not a UUID');
      return text;
    }
    case 'timestamp':
      return timestampOf(textOf(value));
    case 'boolean':
      if (value === 0n || value === 0) return 'f';
      if (value === 1n || value === 1) return 't';
      throw new ValueRefused('is neither 0 nor 1');
    case 'integer':
      if (typeof value === 'bigint') return value.toString();
      if (typeof value === 'number' && Number.isInteger(value)) return String(value);
      throw new ValueRefused('is not an integer');
    case 'bytes':
      if (!Buffer.isBuffer(value)) throw new ValueRefused('is not binary data');
      // bytea's hex input form, with its backslash doubled for the COPY text layer.
      return `\\\\x${value.toString('hex')}`;
    case 'json':
      return encodeCopyField(jsonOf(textOf(value)));
  }
}

/** Text that PostgreSQL can store: valid UTF-8 without NUL. */
function textOf(value: unknown): string {
  let text: string;
  if (Buffer.isBuffer(value)) {
    text = value.toString('utf8');
    // toString replaces invalid sequences; only then is the strict decoder worth its cost.
    if (text.includes(REPLACEMENT)) {
      try {
        strictUtf8.decode(value);
      } catch {
        throw new ValueRefused(`is not valid UTF-8 (${invalidUtf8At(value)})`);
      }
    }
  } else if (typeof value === 'string') {
    text = value;
  } else if (typeof value === 'bigint' || typeof value === 'number') {
    text = String(value);
  } else {
    throw new ValueRefused('is not text');
  }
  const nul = text.indexOf('\0');
  if (nul !== -1) throw new ValueRefused(`holds a NUL character at position ${nul + 1}, which PostgreSQL text cannot store`);
  return text;
}

/** Where the first malformed sequence starts (Unicode 15, table 3-7), 1-based. */
function invalidUtf8At(bytes: Buffer): string {
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    const shape = UTF8_SEQUENCES.find(([from, to]) => lead >= from && lead <= to);
    if (!shape) return `byte ${i + 1}`;
    const [, , second, length] = shape;
    for (let k = 1; k < length; k += 1) {
      if (i + k >= bytes.length) return 'it ends inside a character';
      const [low, high] = k === 1 ? second : [0x80, 0xbf];
      if (bytes[i + k]! < low || bytes[i + k]! > high) return `byte ${i + 1}`;
    }
    i += length;
  }
  return 'unknown position';
}

// Lead byte range, the allowed range of the byte after it, and the sequence length.
const UTF8_SEQUENCES: ReadonlyArray<readonly [number, number, readonly [number, number], number]> = [
  [0xc2, 0xdf, [0x80, 0xbf], 2],
  [0xe0, 0xe0, [0xa0, 0xbf], 3],
  [0xe1, 0xec, [0x80, 0xbf], 3],
  [0xed, 0xed, [0x80, 0x9f], 3],
  [0xee, 0xef, [0x80, 0xbf], 3],
  [0xf0, 0xf0, [0x90, 0xbf], 4],
  [0xf1, 0xf3, [0x80, 0xbf], 4],
  [0xf4, 0xf4, [0x80, 0x8f], 4],
];

/** As PostgreSQL prints timestamptz in UTC (`2026-11-23 10:15:00.123+00`), as a dump has it. */
function timestampOf(text: string): string {
  let iso = text;
  if (!CANONICAL_ISO.test(iso)) {
    const ms = OFFSET_ISO.test(text) ? Date.parse(text.replace(' ', 'T')) : Number.NaN;
    if (Number.isNaN(ms)) throw new ValueRefused('is not an ISO-8601 timestamp with a time zone');
    iso = new Date(ms).toISOString();
    if (!CANONICAL_ISO.test(iso)) throw new ValueRefused('is a timestamp outside the years 0000-9999');
  }
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}+00`;
}

function jsonOf(text: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ValueRefused('is not JSON');
  }
  // jsonb refuses \u0000 and lone surrogates; both can only come from a \u escape.
  if (text.includes('\\u') && !storableInJsonb(parsed)) {
    throw new ValueRefused('holds a \\u0000 or a lone surrogate, which PostgreSQL jsonb cannot store');
  }
  return text;
}

function storableInJsonb(value: unknown): boolean {
  if (typeof value === 'string') return !value.includes('\0') && !hasLoneSurrogate(value);
  if (Array.isArray(value)) return value.every(storableInJsonb);
  if (value && typeof value === 'object') return Object.entries(value).every(([key, inner]) => storableInJsonb(key) && storableInJsonb(inner));
  return true;
}

// PostgreSQL's ISO DateStyle output: `2026-11-23 10:15:00.123456+00`, offsets to the second.
const PG_UTC_TIMESTAMP = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00$/;
const PG_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?([+-])(\d{2})(?::(\d{2}))?(?::(\d{2}))?$/;

/**
 * A PostgreSQL text value (already unescaped from COPY) as SQLite stores it. Timestamps
 * become the ISO-8601 UTC text license-server writes, to the millisecond: license-server
 * never writes finer times, and SQLite compares timestamps as text, so they must all have
 * one form (digits past the millisecond are dropped).
 */
export function postgresToSqlite(kind: ColumnKind, text: string | null): string | number | bigint | Buffer | null {
  if (text === null) return null;
  switch (kind) {
    case 'text':
    case 'json':
      return text;
    case 'uuid':
      if (!isUuid(text)) throw new ValueRefused('is not a UUID');
      return text;
    case 'timestamp': {
      // A dump's own form (UTC): the text is rearranged, which is much cheaper than a Date.
      const utc = PG_UTC_TIMESTAMP.exec(text);
      if (utc) return `${utc[1]}T${utc[2]}.${(utc[3] ?? '').padEnd(3, '0').slice(0, 3)}Z`;
      const match = PG_TIMESTAMP.exec(text);
      if (!match) throw new ValueRefused('is not a timestamp in PostgreSQL\'s ISO form (years 0001-9999, with an offset)');
      const [, year, month, day, hour, minute, second, fraction = '', sign, offsetHours, offsetMinutes = '0', offsetSeconds = '0'] = match;
      const offset = (Number(offsetHours) * 3600 + Number(offsetMinutes) * 60 + Number(offsetSeconds)) * 1000 * (sign === '-' ? -1 : 1);
      // setUTCFullYear, unlike Date.UTC, keeps years 0-99 as they are.
      const date = new Date(0);
      date.setUTCFullYear(Number(year), Number(month) - 1, Number(day));
      date.setUTCHours(Number(hour), Number(minute), Number(second), Number(fraction.padEnd(3, '0').slice(0, 3)));
      date.setTime(date.getTime() - offset);
      const iso = date.toISOString();
      if (!CANONICAL_ISO.test(iso)) throw new ValueRefused('is a timestamp outside the years 0001-9999');
      return iso;
    }
    case 'boolean':
      if (text === 't') return 1;
      if (text === 'f') return 0;
      throw new ValueRefused('is not a boolean (t or f)');
    case 'integer': {
      if (!/^-?\d{1,19}$/.test(text)) throw new ValueRefused('is not an integer');
      const big = BigInt(text);
      return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
    }
    case 'bytes':
      if (!/^\\x(?:[0-9a-fA-F]{2})*$/.test(text)) throw new ValueRefused('is not bytea in hex form (bytea_output = hex)');
      return Buffer.from(text.slice(2), 'hex');
  }
}
