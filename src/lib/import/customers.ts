import type { OperationContext } from '../context.js';
import { checkCustomerEmail, checkCustomerName, insertCustomer, type PreparedCustomer } from '../customers.js';
import type { Database } from '../storage/types.js';
import { finishImport, type ImportOptions, type ImportReport } from './run.js';
import { decodeImport, readImportTable, RowErrors, type ImportColumns } from './table.js';

/**
 * The customer export's columns: `name` and `email` are read; the others are what the server
 * assigns, so an exported file imports as new customers (new ids), each active.
 */
export const CUSTOMER_IMPORT_COLUMNS: ImportColumns = {
  read: ['name', 'email'],
  ignored: ['id', 'active', 'created_at', 'updated_at'],
  required: [['name']],
};

/** Creates a customer per row of a CSV file, all or none (docs/http-api.md, "CSV export and import"). */
export async function importCustomers(db: Database, file: Uint8Array | string, options: ImportOptions, context: OperationContext): Promise<ImportReport> {
  const table = readImportTable(decodeImport(file), CUSTOMER_IMPORT_COLUMNS);
  const errors = new RowErrors();
  const checked: Array<{ line: number; prepared: PreparedCustomer }> = [];
  for (const { line, values } of table.rows) {
    const name = errors.take(line, 'name', () => checkCustomerName(values.name!));
    const email = errors.take(line, 'email', () => checkCustomerEmail(values.email));
    if (name !== undefined && email !== undefined) checked.push({ line, prepared: { name, email } });
  }
  return finishImport(db, 'customers', checked, [...table.errors, ...errors.list], table.rows.length + table.errors.length, (tx, prepared) => insertCustomer(tx, prepared, context), options);
}
