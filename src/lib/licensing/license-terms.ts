import { LicenseServerError } from '../errors.js';
import { describe } from '../validate.js';

/** Checks of the license terms that create, update and renew share. */

/**
 * How a license's offline files seal its decryption key (`license create/update --binding`):
 * to the hardware ID, or to the machine's X25519 key (offline/machine-key.ts). Kept here, not
 * beside the sealing code, so that reading a license does not load the HPKE and curve code.
 */
export const BINDINGS = ['hardware-id', 'machine-key'] as const;
export type Binding = (typeof BINDINGS)[number];

/** `--binding` / `binding`: INVALID_INPUT unless one of BINDINGS. */
export function parseBinding(value: unknown): Binding {
  if (typeof value !== 'string' || !(BINDINGS as readonly string[]).includes(value)) {
    throw new LicenseServerError('INVALID_INPUT', `binding must be ${BINDINGS.join(' or ')}, got ${describe(typeof value === 'string' ? value : String(value))}`);
  }
  return value as Binding;
}

export const MAX_LEASE_HOURS = 720;
export const MAX_METADATA_ENTRIES = 64;
const METADATA_KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const MAX_METADATA_VALUE = 1024;

/** A machine limit: a whole number from 1 up, or null for none. */
export function parseMaxMachines(value: unknown): number | null {
  if (value === null) return null;
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 1) {
    throw new LicenseServerError('INVALID_INPUT', `max_machines must be a whole number from 1 up (or null for no limit), got ${describe(value)}`, {
      hint: 'A license that no machine may use is a deactivated one: `license deactivate`.',
    });
  }
  return number;
}

export function parseLeaseHours(value: unknown): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 1 || number > MAX_LEASE_HOURS) {
    throw new LicenseServerError('INVALID_INPUT', `lease_hours must be a whole number from 1 to ${MAX_LEASE_HOURS}, got ${describe(value)}`);
  }
  return number;
}

/**
 * Metadata is a flat map of short keys to strings, for the vendor's own systems (a CRM id,
 * an order number). An empty string as value removes the key in an update.
 */
export function parseMetadata(value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new LicenseServerError('INVALID_INPUT', 'metadata must be an object of string values');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_METADATA_ENTRIES) {
    throw new LicenseServerError('INVALID_INPUT', `metadata has ${entries.length} keys; at most ${MAX_METADATA_ENTRIES} are kept`);
  }
  const result: Record<string, string> = {};
  for (const [key, entry] of entries) {
    if (!METADATA_KEY.test(key)) {
      throw new LicenseServerError('INVALID_INPUT', `metadata key ${describe(key)} must be 1-64 letters, digits, "_", "." or "-", starting with a letter or digit`);
    }
    if (typeof entry !== 'string' || entry.length > MAX_METADATA_VALUE || /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(entry)) {
      throw new LicenseServerError('INVALID_INPUT', `metadata ${key} must be a string of at most ${MAX_METADATA_VALUE} characters without control characters`);
    }
    result[key] = entry;
  }
  return result;
}

/** The CLI's `KEY=VALUE` form (repeatable); `KEY=` removes the key in an update. */
export function parseMetadataPairs(pairs: readonly string[]): Record<string, string> {
  const object: Record<string, string> = {};
  for (const pair of pairs) {
    const separator = pair.indexOf('=');
    if (separator <= 0) throw new LicenseServerError('INVALID_INPUT', `--metadata takes KEY=VALUE, got ${describe(pair)}`);
    const key = pair.slice(0, separator);
    if (Object.hasOwn(object, key)) throw new LicenseServerError('INVALID_INPUT', `metadata key ${describe(key)} is given twice`);
    object[key] = pair.slice(separator + 1);
  }
  return parseMetadata(object);
}
