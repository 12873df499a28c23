import type { RouteDependencies } from '../route-dependencies.js';
import type { OperationContext } from '../../lib/context.js';
import { importCustomers } from '../../lib/import/customers.js';
import { importLicenses } from '../../lib/import/licenses.js';
import { importRefusal, type ImportOptions, type ImportReport } from '../../lib/import/run.js';
import { IMPORT_MAX_BYTES } from '../../lib/import/table.js';
import type { Database } from '../../lib/storage/types.js';
import { expectQuery, queryBoolean } from '../fields.js';
import type { Route } from '../router.js';

type Importer = (db: Database, file: Uint8Array, options: ImportOptions, context: OperationContext) => Promise<ImportReport>;

/**
 * CSV imports of customers and licenses (docs/http-api.md, "CSV export and import"): a
 * `text/csv` body, every row created in one transaction or none. A dry run answers 200 with
 * every row's error; an import with any row not valid is refused (IMPORT_INVALID), and one
 * that wrote answers 201.
 */
export function importRoutes(deps: RouteDependencies): Route[] {
  const route = (kind: ImportReport['kind'], importer: Importer): Route => ({
    method: 'POST',
    path: `/api/${kind}/import`,
    access: 'admin',
    scope: 'licenses',
    rawBody: { type: 'text/csv', maxBytes: IMPORT_MAX_BYTES, tooLarge: 'IMPORT_TOO_LARGE' },
    handle: async ({ query, raw, actor }) => {
      const q = expectQuery(query, ['dry_run']);
      const dryRun = queryBoolean(q.dry_run, 'dry_run') === true;
      const report = await importer(deps.db, raw, { dryRun }, { actor, clock: deps.clock });
      if (!report.valid && !dryRun) throw importRefusal(report);
      return { status: dryRun ? 200 : 201, json: report };
    },
  });
  return [route('customers', importCustomers), route('licenses', importLicenses)];
}
