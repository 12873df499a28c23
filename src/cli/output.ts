export interface Column<R> {
  readonly header: string;
  readonly value: (row: R) => unknown;
}

/** A plain, aligned text table: readable in a terminal, greppable in a pipe. */
export function formatTable<R>(rows: readonly R[], columns: readonly Column<R>[], empty = '(none)'): string {
  if (rows.length === 0) return empty;
  const cells = rows.map((row) => columns.map((column) => show(column.value(row))));
  const widths = columns.map((column, i) => Math.max(column.header.length, ...cells.map((line) => line[i]!.length)));
  const render = (line: readonly string[]) => line.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  return [render(columns.map((column) => column.header)), ...cells.map(render)].join('\n');
}

/** `key: value` lines for one record. */
export function formatRecord(fields: ReadonlyArray<readonly [string, unknown]>): string {
  const width = Math.max(...fields.map(([key]) => key.length));
  return fields.map(([key, value]) => `${`${key}:`.padEnd(width + 1)} ${show(value)}`).join('\n');
}

export function show(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'string') {
    // Full ISO timestamps are noisy in a table; seconds in UTC are what operators read.
    if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(value)) return value.replace(/\.\d{3}Z$/, 'Z');
    // Never let a stored value move the cursor or change colours in the operator's terminal.
    return value.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  }
  return String(value);
}
