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
