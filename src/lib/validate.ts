import { LicenseServerError } from './errors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Returns the id in its canonical lowercase form, or throws INVALID_ID naming `what`. */
export function parseUuid(value: string, what: string): string {
  if (typeof value !== 'string' || !UUID.test(value)) {
    throw new LicenseServerError('INVALID_ID', `${what} must be a UUID, got ${describe(value)}`);
  }
  return value.toLowerCase();
}

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
// RFC 3339 section 5.6 date-time; "T" and "Z" may be lowercase, fractions are allowed.
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Parses a YYYY-MM-DD date or an RFC 3339 timestamp. A bare date means the start of that
 * day in UTC, or with `endOfDay` the end of it: the next day's 00:00:00 UTC, for an exclusive
 * end such as `valid_until` (so `--valid-until 2027-01-31` includes every second of the 31st;
 * its last second used to be lost, stored as 23:59:59 and then excluded). Calendar-invalid
 * dates such as 2027-02-30 are refused rather than rolled over, which is what Date.parse would do.
 */
export function parseTimestamp(value: string, what: string, options: { endOfDay?: boolean } = {}): Date {
  const fail = (): never => {
    throw new LicenseServerError(
      'INVALID_DATE',
      `${what} must be a date (YYYY-MM-DD) or an RFC 3339 timestamp, got ${describe(value)}`,
    );
  };
  if (typeof value !== 'string') return fail();
  const dateOnly = DATE_ONLY.exec(value);
  const dateTime = dateOnly ? null : DATE_TIME.exec(value);
  const parts = dateOnly ?? dateTime;
  if (!parts) return fail();
  const [year, month, day] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const probe = new Date(Date.UTC(year, month - 1, day));
  if (probe.getUTCFullYear() !== year || probe.getUTCMonth() !== month - 1 || probe.getUTCDate() !== day) {
    return fail();
  }
  if (dateOnly) {
    if (!options.endOfDay) return probe;
    // 9999-12-31 would end in the year 10000, which RFC 3339 (and so a .lic file) cannot write.
    if (year === 9999 && month === 12 && day === 31) {
      throw new LicenseServerError('INVALID_DATE', `${what} 9999-12-31 would end at the start of the year 10000, past what RFC 3339 can write; give a timestamp such as 9999-12-31T23:59:59Z`);
    }
    return new Date(probe.getTime() + 86_400_000);
  }
  const [hour, minute, second] = [Number(parts[4]), Number(parts[5]), Number(parts[6])];
  if (hour > 23 || minute > 59 || second > 59) return fail();
  const parsed = new Date(value.toUpperCase());
  if (Number.isNaN(parsed.getTime())) return fail();
  return parsed;
}

/** RFC 3339 in UTC with second precision, the form every format of ours uses. */
export function toRfc3339Seconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function truncateToSeconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

/** How much of a caller's string an error message may show, once escaped. */
const SHOWN_CHARACTERS = 40;
/**
 * A license key (seven groups of four, however separated) or an admin token anywhere in
 * the text: error messages end up in logs and terminals, so such text is never shown.
 * Deliberately broad: any run of 28 letters and digits counts, hex keys included.
 */
const SECRET_SHAPED = /[0-9A-Za-z]{4}(?:[\s_-]*[0-9A-Za-z]{4}){6}|lsat_/i;
/** A UUID standing alone: an id, which is no secret, and what a reader needs to see. */
const STANDALONE_UUID = /(?<![0-9A-Za-z])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![0-9A-Za-z])/gi;

/**
 * A caller's value for an error message, short whatever came in: a string as at most
 * 40 characters of printable ASCII (everything else escaped), never one that looks like a
 * license key or token; a number or boolean as itself; an array or object by its kind only.
 * It never walks into arrays or objects, so input nested 100,000 deep or 200,000 elements
 * long is described at no cost.
 */
export function describe(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return describeString(value);
    case 'number':
    case 'boolean':
      return String(value);
    case 'undefined':
      return 'nothing';
    case 'object':
      if (value === null) return 'null';
      return Array.isArray(value) ? `an array (${value.length} elements)` : 'an object';
    default:
      return `a ${typeof value}`;
  }
}

function describeString(value: string): string {
  if (SECRET_SHAPED.test(value.slice(0, 10_000).replace(STANDALONE_UUID, ' '))) return `a string of ${value.length} characters (not shown: it looks like a key or token)`;
  let shown = '';
  let used = 0;
  for (; used < value.length && shown.length < SHOWN_CHARACTERS; used += 1) {
    const unit = value.charCodeAt(used);
    const char = value[used]!;
    shown += char === '"' || char === '\\' ? `\\${char}` : unit >= 0x20 && unit <= 0x7e ? char : `\\u${unit.toString(16).padStart(4, '0')}`;
  }
  return used < value.length ? `"${shown}..." (${value.length} characters)` : `"${shown}"`;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when the text holds half a surrogate pair, which has no UTF-8 encoding. */
export function hasLoneSurrogate(value: string): boolean {
  return LONE_SURROGATE.test(value);
}

export function requireNonEmpty(value: string | undefined, what: string, maxLength = 200): string {
  const trimmed = (value ?? '').trim();
  if (trimmed.length === 0) {
    throw new LicenseServerError('INVALID_INPUT', `${what} must not be empty`);
  }
  if (trimmed.length > maxLength) {
    throw new LicenseServerError('INVALID_INPUT', `${what} must be at most ${maxLength} characters`);
  }
  // Control characters would corrupt tables, logs and terminals.
  if (/[\u0000-\u001f\u007f]/.test(trimmed)) {
    throw new LicenseServerError('INVALID_INPUT', `${what} must not contain control characters`);
  }
  // A lone surrogate cannot be encoded as UTF-8, so it could never be signed into a license file.
  if (hasLoneSurrogate(trimmed)) {
    throw new LicenseServerError('INVALID_INPUT', `${what} must be well-formed Unicode text`);
  }
  return trimmed;
}

/**
 * Characters that change what text looks like without being seen themselves: bidirectional
 * controls (U+202E turns `gnp.exe` around), zero-width and other format characters (U+200B,
 * U+2060, U+FEFF), the other default-ignorable code points (U+034F, Hangul fillers,
 * variation selectors, tags) and the line and paragraph separators. Two names differing
 * only by them look the same; one holding them can show as another.
 */
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Bidi_Control}\p{Zl}\p{Zp}]/u;
const INVISIBLE_ALL = new RegExp(INVISIBLE.source, 'gu');

export function hasInvisibleCharacters(value: string): boolean {
  return INVISIBLE.test(value);
}

/**
 * `value` as it can be shown to a person: every invisible character above written as its
 * escape (`\u202e`, `\u{e0041}`), so that an identifier compared byte for byte (a hardware
 * ID, a token name in an audit entry) shows all of its bytes and cannot pass for another.
 */
export function escapeInvisible(value: string): string {
  return value.replace(INVISIBLE_ALL, (char) => {
    const point = char.codePointAt(0)!;
    return point > 0xffff ? `\\u{${point.toString(16)}}` : `\\u${point.toString(16).padStart(4, '0')}`;
  });
}
