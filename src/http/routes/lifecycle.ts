import type { RouteDependencies } from '../route-dependencies.js';
import { LicenseServerError } from '../../lib/errors.js';
import { renewLicense, updateLicense, type LicenseUpdate } from '../../lib/licensing/license-changes.js';
import type { EntitlementGrant } from '../../lib/licensing/licenses.js';
import { deactivateMachine, getMachine, listMachinesPage, reactivateMachine, releaseLostFiles } from '../../lib/licensing/machines.js';
import { listUsageRecordsPage } from '../../lib/licensing/usage-view.js';
import { parseTimestamp, parseUuid } from '../../lib/validate.js';
import { asString, expectFields, expectQuery, PAGING_QUERY, queryBoolean, queryInteger } from '../fields.js';
import { MACHINE_FILTER_QUERY, parseMachineFilters } from '../list-filters.js';
import { listReply } from '../list-reply.js';
import type { Route } from '../router.js';

/** The admin API of the license lifecycle: changes, renewals, usage and machines. */
export function lifecycleRoutes(deps: RouteDependencies): Route[] {
  const { clock } = deps;
  const context = (actor: string) => ({ actor, clock });
  return [
    {
      method: 'PATCH',
      path: '/api/licenses/:id',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, [], ['valid_from', 'valid_until', 'max_machines', 'floating', 'lease_hours', 'add_entitlements', 'remove_entitlements', 'set_limits', 'metadata', 'binding']);
        if (body.floating !== undefined && typeof body.floating !== 'boolean') throw new LicenseServerError('INVALID_INPUT', 'floating must be true or false');
        const update: LicenseUpdate = {
          ...(body.valid_from === undefined ? {} : { validFrom: asString(body.valid_from, 'valid_from') }),
          ...(body.valid_until === undefined ? {} : { validUntil: asString(body.valid_until, 'valid_until') }),
          ...(body.max_machines === undefined ? {} : { maxMachines: body.max_machines as number | null }),
          ...(body.lease_hours === undefined ? {} : { leaseHours: body.lease_hours as number }),
          ...(body.floating === undefined ? {} : { floating: body.floating as boolean }),
          ...(body.add_entitlements === undefined ? {} : { addEntitlements: asGrants(body.add_entitlements, 'add_entitlements') }),
          ...(body.remove_entitlements === undefined ? {} : { removeEntitlements: asCodes(body.remove_entitlements) }),
          ...(body.set_limits === undefined ? {} : { setLimits: asGrants(body.set_limits, 'set_limits') }),
          ...(body.metadata === undefined ? {} : { metadata: body.metadata as Record<string, string> }),
          ...(body.binding === undefined ? {} : { binding: asString(body.binding, 'binding') }),
        };
        const change = await updateLicense(deps.db, parseUuid(params.id!, 'license id'), update, context(actor));
        return { json: change };
      },
    },
    {
      method: 'POST',
      path: '/api/licenses/:id/renew',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, [], ['by', 'until']);
        if ((body.by === undefined) === (body.until === undefined)) {
          throw new LicenseServerError('INVALID_INPUT', 'give exactly one of "by" (such as "365d") and "until" (a date)');
        }
        const renewal = body.by !== undefined ? { by: asString(body.by, 'by') } : { until: asString(body.until, 'until') };
        return { json: await renewLicense(deps.db, parseUuid(params.id!, 'license id'), renewal, context(actor)) };
      },
    },
    {
      method: 'GET',
      path: '/api/licenses/:id/usage',
      access: 'admin',
      scope: 'read',
      handle: async (request) => {
        const q = expectQuery(request.query, ['since', ...PAGING_QUERY]);
        const id = parseUuid(request.params.id!, 'license id');
        return listReply(request, 'license-usage', `/api/licenses/${id}/usage`, (page) => listUsageRecordsPage(deps.db, id, {
          ...(q.since === undefined ? {} : { since: parseTimestamp(q.since, 'since') }),
          ...page,
        }));
      },
    },
    {
      method: 'GET',
      path: '/api/machines',
      access: 'admin',
      scope: 'read',
      handle: async (request) => {
        const q = expectQuery(request.query, [...MACHINE_FILTER_QUERY, ...PAGING_QUERY]);
        const filter = parseMachineFilters(q);
        const at = clock();
        return listReply(request, 'machines', '/api/machines', (page) => listMachinesPage(deps.db, { ...filter, ...page }, at));
      },
    },
    {
      method: 'GET',
      path: '/api/machines/:id',
      access: 'admin',
      scope: 'read',
      handle: async ({ params }) => ({ json: await getMachine(deps.db, params.id!, clock()) }),
    },
    {
      method: 'POST',
      path: '/api/machines/:id/deactivate',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, []);
        return { json: await deactivateMachine(deps.db, params.id!, context(actor)) };
      },
    },
    {
      method: 'POST',
      path: '/api/machines/:id/activate',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, []);
        return { json: await reactivateMachine(deps.db, params.id!, context(actor)) };
      },
    },
    {
      method: 'POST',
      path: '/api/machines/:id/release',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, ['lost_file'], ['reason']);
        // The only release an operator can make: stating that the machine's files are lost.
        if (body.lost_file !== true) throw new LicenseServerError('INVALID_INPUT', 'lost_file must be true: it states that the machine\'s offline files are lost');
        const reason = body.reason === undefined ? {} : { reason: asString(body.reason, 'reason') };
        return { json: await releaseLostFiles(deps.db, params.id!, reason, context(actor)) };
      },
    },
  ];
}


function asCodes(value: unknown): string[] {
  if (!Array.isArray(value) || value.length > 1000 || !value.every((code) => typeof code === 'string')) {
    throw new LicenseServerError('INVALID_INPUT', 'remove_entitlements must be an array of entitlement codes');
  }
  return value as string[];
}

export function asGrants(value: unknown, name: string): EntitlementGrant[] {
  if (!Array.isArray(value) || value.length > 1000) throw new LicenseServerError('INVALID_INPUT', `${name} must be an array`);
  return value.map((entry) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw new LicenseServerError('INVALID_INPUT', `each entry of ${name} must be an object with "code" and optionally "usage_limit"`);
    }
    expectFields(entry as Record<string, unknown>, ['code'], ['usage_limit']);
    const { code, usage_limit: limit } = entry as Record<string, unknown>;
    if (limit !== undefined && limit !== null && typeof limit !== 'number') throw new LicenseServerError('INVALID_INPUT', 'usage_limit must be an integer or null');
    return { code: asString(code, 'entitlement code'), usageLimit: (limit as number | null | undefined) ?? null };
  });
}
