import type { SqlValue } from './types.js';

/**
 * A value as the SQLite driver binds it: booleans as 0/1, times as the ISO text the app
 * stores, blobs as Buffers. The daemon's connection and its reader thread bind alike, so a
 * query reads the same rows on either.
 */
export function toSqlite(value: SqlValue): unknown {
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array && !Buffer.isBuffer(value)) return Buffer.from(value);
  return value;
}
