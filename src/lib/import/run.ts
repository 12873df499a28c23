import { isLicenseServerError, LicenseServerError } from '../errors.js';
import type { Database, Queryable } from '../storage/types.js';
import type { RowError } from './table.js';

export interface ImportOptions {
  /** Check every row and write nothing. */
  readonly dryRun?: boolean;
}

/** What an import did, or with a dry run what it would do. */
export interface ImportReport {
  readonly kind: 'customers' | 'licenses';
  readonly dry_run: boolean;
  /** Data rows read (blank rows not counted). */
  readonly rows: number;
  /** Every row is valid. */
  readonly valid: boolean;
  /** Rows created: 0 for a dry run or when any row is not valid. */
  readonly imported: number;
  /** Every row's errors, by line. */
  readonly errors: RowError[];
  /** The records created, each with the line of its row. */
  readonly created: Array<{ readonly line: number; readonly id: string }>;
}

/**
 * The end every import shares: rows checked, then (unless a dry run, or any row failed) every
 * row created in one transaction, each by the same code as one create, so with its audit
 * entry and event. Should a row fail there after all (a check the database makes), the
 * transaction is rolled back and the failure names the row's line.
 */
export async function finishImport<P>(
  db: Database,
  kind: ImportReport['kind'],
  checked: ReadonlyArray<{ readonly line: number; readonly prepared: P }>,
  errors: readonly RowError[],
  rows: number,
  insert: (tx: Queryable, prepared: P) => Promise<{ readonly id: string }>,
  options: ImportOptions,
): Promise<ImportReport> {
  const sorted = [...errors].sort((a, b) => a.line - b.line);
  const report = { kind, dry_run: options.dryRun === true, rows, valid: sorted.length === 0, errors: sorted };
  if (options.dryRun || sorted.length > 0) return { ...report, imported: 0, created: [] };
  const created = await db.transaction(async (tx) => {
    const out: Array<{ line: number; id: string }> = [];
    for (const { line, prepared } of checked) {
      try {
        out.push({ line, id: (await insert(tx, prepared)).id });
      } catch (error) {
        if (!isLicenseServerError(error)) throw error;
        throw new LicenseServerError('IMPORT_INVALID', `line ${line}: ${error.message} (${error.code}); nothing was imported`);
      }
    }
    return out;
  });
  return { ...report, imported: created.length, created };
}

/** The refusal of an import with rows that are not valid, naming the first few by line (the API's answer). */
export function importRefusal(report: ImportReport): LicenseServerError {
  const shown = report.errors.slice(0, 10).map((error) => `line ${error.line}${error.column ? ` (${error.column})` : ''}: ${error.message}`);
  const more = report.errors.length > shown.length ? `; and ${report.errors.length - shown.length} more` : '';
  const lines = new Set(report.errors.map((error) => error.line)).size;
  return new LicenseServerError('IMPORT_INVALID', `${lines} of ${report.rows} rows are not valid, so nothing was imported: ${shown.join('; ')}${more}`);
}
