/**
 * Normalises column values that the two engines return differently: PostgreSQL gives
 * Date, boolean, Buffer and parsed JSON; SQLite gives ISO text, 0/1, Buffer and JSON text.
 */
export const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export function asIso(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  // SQLite gives back what we stored, already in this form: skip the parse on the hot path.
  if (typeof value === 'string') return ISO_TIMESTAMP.test(value) ? value : new Date(value).toISOString();
  throw new TypeError(`expected a timestamp, got ${typeof value}`);
}

export function asIsoOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : asIso(value);
}

export function asBool(value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return Number(value) !== 0;
  throw new TypeError(`expected a boolean, got ${typeof value}`);
}

export function asInt(value: unknown): number {
  const number = typeof value === 'string' || typeof value === 'bigint' ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number)) {
    throw new TypeError(`expected an integer, got ${typeof value}`);
  }
  return number;
}

export function asIntOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : asInt(value);
}

export function asBytesOrNull(value: unknown): Buffer | null {
  if (value === null || value === undefined) return null;
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value);
  throw new TypeError(`expected bytes, got ${typeof value}`);
}

export function asJson(value: unknown): Record<string, unknown> {
  if (typeof value === 'string') return JSON.parse(value) as Record<string, unknown>;
  if (value && typeof value === 'object') return value as Record<string, unknown>;
  return {};
}
