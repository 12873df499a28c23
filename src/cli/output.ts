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
    // Timestamps are shown as --json has them (README, "Output for scripts"), so that text
    // and JSON agree. Never let a stored value move the cursor or change colours in the
    // operator's terminal.
    return value.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  }
  return String(value);
}
