import { ImportCommand } from '../../cli/import-command.js';
import { importCustomers } from '../../lib/import/customers.js';
import type { ImportReport } from '../../lib/import/run.js';

export default class CustomerImport extends ImportCommand<typeof CustomerImport> {
  static override description = `Create customers from a CSV file: every row, or none when any row is not valid.
The columns are those of a customer export (GET /api/customers?format=csv): name and email are read; id, active, created_at and updated_at are ignored, so each row is a new, active customer. --dry-run checks every row and lists each error by line, writing nothing. Exits 2 (IMPORT_INVALID) when a row is not valid, a dry run too; with --json the output is the report. At most 2,000 rows and 4 MiB.`;
  static override examples = ['<%= config.bin %> customer import customers.csv --dry-run', '<%= config.bin %> customer import customers.csv'];

  async run(): Promise<ImportReport> {
    return this.runImport(importCustomers, 'customers');
  }
}
