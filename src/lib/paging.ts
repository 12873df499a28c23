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
