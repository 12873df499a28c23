import { countAudit } from '../../lib/audit.js';
import { countLicenses } from '../../lib/licensing/licenses.js';
import { countMachines } from '../../lib/licensing/machines.js';
import { expectQuery } from '../fields.js';
import { AUDIT_FILTER_QUERY, LICENSE_FILTER_QUERY, MACHINE_FILTER_QUERY, parseAuditFilters, parseLicenseFilters, parseMachineFilters } from '../list-filters.js';
import type { RouteDependencies } from '../route-dependencies.js';
import type { Route } from '../router.js';

/**
 * How many rows a list's filters select, with the list's own query parameters (no paging):
 * `{"count": N, "exact": true}`, or past paging.ts COUNT_BOUND `{"count": COUNT_BOUND,
 * "exact": false}` (at least that many).
 */
export function listCountRoutes(deps: RouteDependencies): Route[] {
  const count = (path: string, known: readonly string[], counter: (q: Record<string, string | undefined>, at: Date) => Promise<unknown>): Route => ({
    method: 'GET',
    path,
    access: 'admin',
    scope: 'read',
    handle: async ({ query }) => ({ json: await counter(expectQuery(query, known), deps.clock()) }),
  });
  return [
    count('/api/licenses/count', LICENSE_FILTER_QUERY, (q, at) => countLicenses(deps.db, parseLicenseFilters(q), at)),
    count('/api/machines/count', MACHINE_FILTER_QUERY, (q, at) => countMachines(deps.db, parseMachineFilters(q), at)),
    count('/api/audit/count', AUDIT_FILTER_QUERY, (q) => countAudit(deps.db, parseAuditFilters(q))),
  ];
}
