/**
 * Rewrites `?` placeholders as PostgreSQL's `$1, $2, ...`, leaving `?` inside quoted
 * strings, quoted identifiers and comments alone, so that SQL is written once for both
 * engines.
 */
export function toNumberedPlaceholders(sql: string): string {
  let out = '';
  let index = 0;
  let i = 0;
  while (i < sql.length) {
    const char = sql[i]!;
    if (char === "'" || char === '"') {
      const end = closingQuote(sql, i, char);
      out += sql.slice(i, end);
      i = end;
    } else if (char === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const stop = end === -1 ? sql.length : end;
      out += sql.slice(i, stop);
      i = stop;
    } else if (char === '?') {
      index += 1;
      out += `$${index}`;
      i += 1;
    } else {
      out += char;
      i += 1;
    }
  }
  return out;
}

function closingQuote(sql: string, start: number, quote: string): number {
  let i = start + 1;
  while (i < sql.length) {
    if (sql[i] === quote) {
      if (sql[i + 1] === quote) {
        i += 2;
        continue;
      }
      return i + 1;
    }
    i += 1;
  }
  return sql.length;
}
