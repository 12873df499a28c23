import { describe } from '../../validate.js';

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

function shown(value: unknown): string {
  if (Buffer.isBuffer(value)) return describe(value.toString('utf8'));
  if (typeof value === 'bigint') return value.toString();
  return describe(value);
}
