import { readFileSync, statSync } from 'node:fs';
import { LicenseServerError } from '../lib/errors.js';
import { describeFsError } from '../lib/fs-errors.js';
import type { ImportReport } from '../lib/import/run.js';
import { checkImportBytes } from '../lib/import/table.js';
import { formatTable } from './output.js';

/** The CSV file of an import, refused by its size before it is read. */
export function readImportFile(file: string): Buffer {
  let bytes: Buffer;
  try {
    checkImportBytes(statSync(file).size);
    bytes = readFileSync(file);
  } catch (error) {
    if (error instanceof LicenseServerError) throw error;
    throw new LicenseServerError('FILE_UNREADABLE', `cannot read the CSV file ${file}: ${describeFsError(error)}`);
  }
  return bytes;
}

/**
 * What an import command shows: every row's error by line when any row is not valid (then
 * also the failure, IMPORT_INVALID, for the exit code: a dry run that finds errors fails as
 * the import would); what a dry run found; or, once imported, each row's line and new id.
 */
export function describeImport(report: ImportReport, noun: string): { text: string; ids: string; failure?: LicenseServerError } {
  const ids = report.created.map((row) => row.id).join('\n');
  if (!report.valid) {
    const table = formatTable(report.errors, [
      { header: 'LINE', value: (error) => error.line },
      { header: 'COLUMN', value: (error) => error.column ?? '-' },
      { header: 'CODE', value: (error) => error.code },
      { header: 'MESSAGE', value: (error) => error.message },
    ]);
    const lines = new Set(report.errors.map((error) => error.line)).size;
    const summary = `${lines} of ${report.rows} rows are not valid${report.dry_run ? '' : ', so nothing was imported'}; each error is listed above by line`;
    return { text: `${report.dry_run ? 'Dry run: nothing was written.\n' : ''}${table}`, ids, failure: new LicenseServerError('IMPORT_INVALID', summary) };
  }
  if (report.dry_run) return { text: `Dry run: all ${report.rows} rows are valid; nothing was written. Run again without --dry-run to create ${report.rows} ${noun}.`, ids };
  const table = formatTable(report.created, [
    { header: 'LINE', value: (row) => row.line },
    { header: 'ID', value: (row) => row.id },
  ]);
  return { text: `Imported ${report.imported} ${noun}.\n${table}`, ids };
}
