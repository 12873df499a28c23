import { LicenseServerError } from './errors.js';
import { describe } from './validate.js';

const DURATION = /^(\d{1,5})([dhwy])$/;
const UNIT_MS = { h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000, y: 365 * 86_400_000 } as const;

/** `365d`, `12w`, `1y` (365 days), `36h`: a span of time for renewals and token expiry. */
export function parseDuration(value: string, what: string): number {
  const match = DURATION.exec(value.trim());
  const amount = match ? Number(match[1]) : 0;
  if (!match || amount < 1) {
    throw new LicenseServerError('INVALID_INPUT', `${what} must be a whole number with a unit h, d, w or y (such as 365d), got ${describe(value)}`);
  }
  const ms = amount * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (ms > 100 * UNIT_MS.y) throw new LicenseServerError('INVALID_INPUT', `${what} must be at most 100 years, got ${describe(value)}`);
  return ms;
}

const INTERVAL = /^(\d{1,9})(ms|s|m|h)$/;
const INTERVAL_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/**
 * `500ms`, `1s`, `5m`, `6h`: an interval between runs of background work, in a form that is
 * also a Go duration, so that it can be handed to Litestream as written. Undefined when the
 * text is not one.
 */
export function parseInterval(value: string): number | undefined {
  const match = INTERVAL.exec(value.trim());
  return match ? Number(match[1]) * INTERVAL_MS[match[2] as keyof typeof INTERVAL_MS] : undefined;
}

/** The shortest exact form of an interval in ms, as parseInterval reads it: 3600000 is `1h`. */
export function formatInterval(ms: number): string {
  for (const unit of ['h', 'm', 's'] as const) {
    if (ms >= INTERVAL_MS[unit] && ms % INTERVAL_MS[unit] === 0) return `${ms / INTERVAL_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
