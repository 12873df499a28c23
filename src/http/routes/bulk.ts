import type { RouteDependencies } from '../route-dependencies.js';
import { cancelBulkJob, createBulkJob, getBulkJob, listBulkJobsPage, previewBulk } from '../../lib/bulk/jobs.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { License } from '../../lib/licensing/licenses.js';
import { asFilter, bulkSelection } from '../bulk-selection.js';
import { asString, expectFields, expectQuery, pageReply, PAGING_QUERY, queryPage } from '../fields.js';
import { licenseAsSeenBy } from '../license-visibility.js';
import type { Route } from '../router.js';

/**
 * Bulk actions over a list filter (docs/http-api.md, "Bulk actions"): a preview, then a job
 * that a daemon runs in batches (lib/bulk/runner.ts). The counting of a preview or a new job
 * reads through the admin reads, so that a filter over a million rows does not hold the
 * connections and, on SQLite, the thread that answer clients.
 */
export function bulkRoutes(deps: RouteDependencies): Route[] {
  const context = (actor: string) => ({ actor, clock: deps.clock });
  return [
    {
      method: 'POST',
      path: '/api/bulk',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ body, actor, scopes }) => {
        expectFields(body, ['target', 'action'], ['by', 'filter', 'dry_run']);
        if (body.dry_run !== undefined && typeof body.dry_run !== 'boolean') throw new LicenseServerError('INVALID_INPUT', 'dry_run must be true or false');
        const request = {
          target: asString(body.target, 'target'),
          action: asString(body.action, 'action'),
          ...(body.by === undefined ? {} : { by: asString(body.by, 'by') }),
          filter: asFilter(body.filter),
        };
        if (body.dry_run === true) {
          const preview = await previewBulk(deps.state.adminReads, request, bulkSelection, deps.clock());
          const first = preview.target === 'licenses' ? (preview.first as License[]).map((license) => licenseAsSeenBy(license, scopes)) : preview.first;
          return { json: { ...preview, first } };
        }
        const job = await createBulkJob(deps.db, deps.state.adminReads, request, bulkSelection, context(actor));
        return { status: 202, json: job, headers: { Location: `/api/bulk/${job.id}` } };
      },
    },
    {
      method: 'GET',
      path: '/api/bulk',
      access: 'admin',
      scope: 'read',
      handle: async ({ query }) => {
        const q = expectQuery(query, [...PAGING_QUERY]);
        return pageReply('/api/bulk', query, await listBulkJobsPage(deps.db, queryPage(q)));
      },
    },
    {
      method: 'GET',
      path: '/api/bulk/:id',
      access: 'admin',
      scope: 'read',
      handle: async ({ params, query }) => {
        expectQuery(query, []);
        return { json: await getBulkJob(deps.db, params.id!) };
      },
    },
    {
      method: 'POST',
      path: '/api/bulk/:id/cancel',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, []);
        return { json: await cancelBulkJob(deps.db, params.id!, context(actor)) };
      },
    },
  ];
}
