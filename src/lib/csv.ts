import { LicenseServerError } from './errors.js';

/**
 * CSV as RFC 4180 has it (docs/http-api.md, "CSV export and import", pins every rule):
 * records end in CRLF, fields are separated by commas, and a field holding a comma, a double
 * quote, CR or LF is enclosed in double quotes with its quotes doubled. Text is UTF-8; the
 * writer puts no byte order mark, the reader skips one (Excel's "CSV UTF-8" writes it).
 *
 * A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula, and some
 * take a leading tab or CR the same way (OWASP, "CSV Injection"): a customer named
 * `=HYPERLINK(...)` would run in the support person's spreadsheet. So the writer puts a `'`
 * before any field that starts with one of those six characters after zero or more `'`, and
 * the reader takes one `'` off such a field again. The rule is one-to-one: a field that
 * really starts with `'=` is written `''=` and read back as `'=`.
 */

export const CSV_LINE_END = '\r\n';

const FORMULA = /^'*[=+\-@\t\r]/;
const ESCAPED_FORMULA = /^'+[=+\-@\t\r]/;

/** The field as written: a formula start defused with a leading `'`. */
export function defuseFormula(text: string): string {
  return FORMULA.test(text) ? `'${text}` : text;
}

/** What defuseFormula undoes: one leading `'` off a field that defuseFormula would have written so. */
export function restoreFormula(text: string): string {
  return ESCAPED_FORMULA.test(text) ? text.slice(1) : text;
}

/** One field: defused, then quoted when it holds a comma, a quote, CR or LF. */
export function csvField(text: string): string {
  const safe = defuseFormula(text);
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** One record and its CRLF. */
export function csvRecord(fields: readonly string[]): string {
  return `${fields.map(csvField).join(',')}${CSV_LINE_END}`;
}

/**
 * A JSON value as the text of one cell: a string as it is, a number or boolean as JSON writes
 * it, null (and a member left out) as an empty cell, an array or object as its compact JSON
 * text, which keeps nested values (a license's entitlements and metadata, an audit entry's
 * details) whole and readable back.
 */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** A record as read, with the physical line it starts on (1-based; a quoted field may span lines). */
export interface CsvRecord {
  readonly line: number;
  readonly fields: string[];
}

/**
 * Reads CSV text into records, each field with its formula escape undone. Line ends may be
 * CRLF, LF or a lone CR (what spreadsheets write varies); inside quotes they are kept as
 * they are. A final line end is optional. Anything RFC 4180 does not allow is refused as
 * CSV_MALFORMED naming its line: a quote inside an unquoted field, text after a closing
 * quote, a quoted field that never closes.
 */
export function parseCsv(text: string): CsvRecord[] {
  const records: CsvRecord[] = [];
  let at = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 1;
  const end = text.length;
  while (at < end) {
    const start = line;
    const fields: string[] = [];
    for (;;) {
      let field: string;
      if (text[at] === '"') {
        const opened = line;
        let value = '';
        at += 1;
        for (;;) {
          const quote = text.indexOf('"', at);
          if (quote === -1) throw malformed(opened, 'a quoted field is never closed');
          const chunk = text.slice(at, quote);
          value += chunk;
          line += countLineEnds(chunk);
          at = quote + 1;
          if (text[at] === '"') {
            value += '"';
            at += 1;
            continue;
          }
          break;
        }
        if (at < end && text[at] !== ',' && text[at] !== '\r' && text[at] !== '\n') {
          throw malformed(line, 'a quoted field is followed by text before the next comma or line end; double the quotes inside a quoted field');
        }
        field = value;
      } else {
        let stop = at;
        while (stop < end && text[stop] !== ',' && text[stop] !== '\r' && text[stop] !== '\n') stop += 1;
        field = text.slice(at, stop);
        if (field.includes('"')) throw malformed(line, 'a field that is not quoted holds a double quote; enclose the field in quotes and double the quotes inside');
        at = stop;
      }
      fields.push(restoreFormula(field));
      if (text[at] === ',') {
        at += 1;
        continue;
      }
      break;
    }
    if (text[at] === '\r') at += text[at + 1] === '\n' ? 2 : 1;
    else if (text[at] === '\n') at += 1;
    line += 1;
    records.push({ line: start, fields });
  }
  return records;
}

function countLineEnds(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i += 1) {
    const char = text.charCodeAt(i);
    if (char === 0x0a) count += 1;
    else if (char === 0x0d && text.charCodeAt(i + 1) !== 0x0a) count += 1;
  }
  return count;
}

function malformed(line: number, why: string): LicenseServerError {
  return new LicenseServerError('CSV_MALFORMED', `line ${line}: ${why}`);
}
