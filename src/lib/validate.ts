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
 * day in UTC, or its last second when `endOfDay` is set (so `--valid-until 2027-01-31`
 * includes the 31st). Calendar-invalid dates such as 2027-02-30 are refused rather than
 * rolled over, which is what Date.parse would do.
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
    return options.endOfDay ? new Date(probe.getTime() + 86_399_000) : probe;
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

/** Quotes a value for an error message without letting control characters through. */
export function describe(value: unknown): string {
  if (typeof value !== 'string') return String(value);
  const shown = value.length > 80 ? `${value.slice(0, 77)}...` : value;
  return JSON.stringify(shown);
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
