import { ImportCommand } from '../../cli/import-command.js';
import { importLicenses } from '../../lib/import/licenses.js';
import type { ImportReport } from '../../lib/import/run.js';

export default class LicenseImport extends ImportCommand<typeof LicenseImport> {
  static override description = `Create licenses from a CSV file: every row, or none when any row is not valid.
The columns are those of a license export (GET /api/licenses?format=csv). Read: type, valid_from, valid_until, max_machines, floating, lease_hours, metadata (JSON), binding, entitlements (the export's JSON, or CODE[:LIMIT] separated by ";"), has_decryption_key, and the customer by customer_id, customer_email or customer_name. Ignored: id, key, key_prefix, customer_active, active, machines_in_use, created_at, updated_at, so each row is a new license with a new key. --dry-run checks every row and lists each error by line, writing nothing. Exits 2 (IMPORT_INVALID) when a row is not valid, a dry run too; with --json the output is the report. At most 2,000 rows and 4 MiB.`;
  static override examples = ['<%= config.bin %> license import licenses.csv --dry-run', '<%= config.bin %> license import licenses.csv'];

  async run(): Promise<ImportReport> {
    return this.runImport(importLicenses, 'licenses');
  }
}
