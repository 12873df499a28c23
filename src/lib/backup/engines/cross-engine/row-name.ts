import { describe } from '../../../validate.js';

/**
 * How an error names a row: by its primary key (ids, a version, a slot time, an event
 * name), which is never a secret; a key value that is itself unprintable is shown escaped
 * and cut short.
 */
export function rowName(columns: ReadonlyArray<{ readonly name: string; readonly pk: number }>, row: readonly unknown[]): string {
  const keys = columns.map((column, index) => ({ ...column, index })).filter((column) => column.pk > 0).sort((a, b) => a.pk - b.pk);
  if (keys.length === 0) return 'a row without a primary key';
  return `row ${keys.map((key) => `${key.name} ${shown(row[key.index])}`).join(', ')}`;
}

// Row ids are UUIDs, which describe() takes for a key or token (they have its shape) and
// hides; an id is no secret, and without it the operator cannot find the row to correct.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function shown(value: unknown): string {
  const text = Buffer.isBuffer(value) ? value.toString('utf8') : value;
  if (typeof text === 'string' && UUID.test(text)) return text;
  if (typeof text === 'bigint') return text.toString();
  return describe(text);
}
