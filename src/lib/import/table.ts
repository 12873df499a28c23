import { parseCsv } from '../csv.js';
import { isLicenseServerError, LicenseServerError, type ErrorCode } from '../errors.js';

/**
 * An import is bounded because it is one transaction: nothing is written unless every row is
 * valid, so every row is written while the store's write lock is held (SQLite: client
 * validations that write wait for it) and the transaction stays open (PostgreSQL). A license
 * is about ten statements, as for one create: on a loaded 2-core machine 5,000 licenses took
 * 2.2 s on SQLite and 19 s on PostgreSQL, so a file holds at most 2,000 rows; larger lists go
 * in parts.
 */
export const IMPORT_MAX_ROWS = 2_000;
export const IMPORT_MAX_BYTES = 4 * 1024 * 1024;

/** The columns of one kind of import. Names are the export's (the JSON API's members). */
export interface ImportColumns {
  /** Columns the import reads. */
  readonly read: readonly string[];
  /** Columns of the export it passes over: what the server assigns or counts (ids, keys, times). */
  readonly ignored: readonly string[];
  /** Each inner list: the header must have at least one of these columns. */
  readonly required: ReadonlyArray<readonly string[]>;
}

/** One data row: its physical line and its value for every column the import reads ('' when absent). */
export interface ImportRow {
  readonly line: number;
  readonly values: Readonly<Record<string, string>>;
}

export interface RowError {
  readonly line: number;
  /** The column at fault, or null when it is the row as a whole. */
  readonly column: string | null;
  readonly code: ErrorCode;
  readonly message: string;
}

/** The file's bytes as text: at most IMPORT_MAX_BYTES, and UTF-8. */
export function decodeImport(input: Uint8Array | string): string {
  const size = typeof input === 'string' ? Buffer.byteLength(input, 'utf8') : input.byteLength;
  checkImportBytes(size);
  if (typeof input === 'string') return input;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(input);
  } catch {
    throw new LicenseServerError('CSV_MALFORMED', 'the file is not UTF-8 text; save it as "CSV UTF-8"');
  }
}

export function checkImportBytes(size: number): void {
  if (size > IMPORT_MAX_BYTES) {
    throw new LicenseServerError('IMPORT_TOO_LARGE', `the file is ${size} bytes; an import takes at most ${IMPORT_MAX_BYTES} bytes (4 MiB) and ${IMPORT_MAX_ROWS} rows; split the file`);
  }
}

/**
 * Reads the header and the data rows. The header names the columns (trimmed, in any case);
 * a column the import neither reads nor ignores is refused, as a typo must not be passed
 * over. Rows whose every field is empty (blank lines, a spreadsheet's empty rows) are
 * skipped. A row with another number of fields than the header is that row's error.
 */
export function readImportTable(text: string, columns: ImportColumns): { rows: ImportRow[]; errors: RowError[] } {
  const records = parseCsv(text).filter((record) => record.fields.some((field) => field !== ''));
  const [header, ...data] = records;
  if (header === undefined) throw new LicenseServerError('IMPORT_COLUMNS_INVALID', 'the file is empty; its first line must name the columns');
  if (data.length > IMPORT_MAX_ROWS) {
    throw new LicenseServerError('IMPORT_TOO_LARGE', `the file has ${data.length} rows; an import takes at most ${IMPORT_MAX_ROWS}`);
  }
  const names = header.fields.map((field) => field.trim().toLowerCase());
  const known = [...columns.read, ...columns.ignored];
  names.forEach((name, i) => {
    if (name === '') throw new LicenseServerError('IMPORT_COLUMNS_INVALID', `line ${header.line}: column ${i + 1} of the header has no name`);
    if (!known.includes(name)) {
      throw new LicenseServerError('IMPORT_COLUMNS_INVALID', `line ${header.line}: unknown column ${JSON.stringify(name.slice(0, 64))}; an import reads ${columns.read.join(', ')} and ignores ${columns.ignored.join(', ')}`);
    }
    if (names.indexOf(name) !== i) throw new LicenseServerError('IMPORT_COLUMNS_INVALID', `line ${header.line}: column "${name}" is named twice`);
  });
  for (const oneOf of columns.required) {
    if (!oneOf.some((name) => names.includes(name))) {
      throw new LicenseServerError('IMPORT_COLUMNS_INVALID', `line ${header.line}: the header has no column ${oneOf.map((name) => `"${name}"`).join(' or ')}`);
    }
  }
  const rows: ImportRow[] = [];
  const errors: RowError[] = [];
  for (const record of data) {
    if (record.fields.length !== names.length) {
      errors.push({ line: record.line, column: null, code: 'CSV_MALFORMED', message: `the row has ${record.fields.length} fields; the header has ${names.length}` });
      continue;
    }
    const values: Record<string, string> = Object.fromEntries(columns.read.map((name) => [name, '']));
    names.forEach((name, i) => {
      if (columns.read.includes(name)) values[name] = record.fields[i]!;
    });
    rows.push({ line: record.line, values });
  }
  return { rows, errors };
}

/** Collects a row's errors, one per column, so that a dry run reports them all at once. */
export class RowErrors {
  readonly list: RowError[] = [];
  private readonly lines = new Set<number>();

  /** The value `parse` gives, or undefined when it throws a LicenseServerError (then recorded). */
  take<T>(line: number, column: string | null, parse: () => T): T | undefined {
    try {
      return parse();
    } catch (error) {
      if (!isLicenseServerError(error)) throw error;
      this.add(line, column, error);
      return undefined;
    }
  }

  add(line: number, column: string | null, error: LicenseServerError): void {
    this.list.push({ line, column, code: error.code, message: error.message });
    this.lines.add(line);
  }

  has(line: number): boolean {
    return this.lines.has(line);
  }
}
