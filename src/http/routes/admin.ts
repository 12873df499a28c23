import type { RouteDependencies } from '../route-dependencies.js';
import { listAuditPage } from '../../lib/audit.js';
import { createCustomer, listCustomersPage, setCustomerActive, updateCustomer } from '../../lib/customers.js';
import { createEntitlement, listEntitlementsPage } from '../../lib/licensing/entitlements.js';
import { LicenseServerError } from '../../lib/errors.js';
import { createLicense, listLicensesPage, setLicenseActive } from '../../lib/licensing/licenses.js';
import { getCustomerSummary, getLicenseView } from '../../lib/licensing/usage-view.js';
import { asGrants } from './lifecycle.js';
import { checkoutLicense } from '../../lib/offline/checkout.js';
import { ensureSigningKey } from '../../lib/signing-keys/keys.js';
import { parseUuid } from '../../lib/validate.js';
import { asString, expectFields, expectQuery, PAGING_QUERY, queryBoolean } from '../fields.js';
import { listReply } from '../list-reply.js';
import { licenseAsSeenBy } from '../license-visibility.js';
import { AUDIT_FILTER_QUERY, LICENSE_FILTER_QUERY, parseAuditFilters, parseLicenseFilters } from '../list-filters.js';
import { refusalOrError } from '../metrics.js';
import type { Route } from '../router.js';

/** The admin API: the same operations as the command line, behind an admin bearer token. */
export function adminRoutes(deps: RouteDependencies): Route[] {
  const { clock } = deps;
  const context = (actor: string) => ({ actor, clock });
  const now = () => clock();
  return [
    {
      method: 'GET',
      path: '/api/signing-key',
      access: 'admin',
      scope: 'read',
      handle: async ({ actor }) => {
        const key = await ensureSigningKey(deps.db, context(actor));
        return { json: { public_key_pem: key.public_key_pem, key_id: key.key_id } };
      },
    },
    {
      method: 'POST',
      path: '/api/licenses/:id/checkout',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor, accept }) => {
        let result;
        try {
          expectFields(body, ['ttl_days'], ['hardware_id', 'request']);
          const id = parseUuid(params.id!, 'license id');
          result = await checkoutLicense(deps.db, id, { ttlDays: body.ttl_days, hardwareId: body.hardware_id, activationRequest: body.request }, {
            ...context(actor),
            issuer: deps.settings.issuer,
            requestWindowDays: deps.settings.offline.requestWindowDays,
          });
        } catch (error) {
          deps.metrics?.checkout(refusalOrError(error));
          throw error;
        }
        deps.metrics?.checkout('issued');
        if (wantsOctetStream(accept)) {
          return {
            raw: result.license_file,
            contentType: 'application/octet-stream',
            headers: { 'Content-Disposition': `attachment; filename="${result.filename}"` },
          };
        }
        return { json: result };
      },
    },
    {
      method: 'GET',
      path: '/api/customers',
      access: 'admin',
      scope: 'read',
      handle: async (request) => {
        const q = expectQuery(request.query, ['active', ...PAGING_QUERY]);
        return listReply(request, 'customers', '/api/customers', (page) => listCustomersPage(deps.db, { active: queryBoolean(q.active, 'active'), ...page }));
      },
    },
    {
      method: 'POST',
      path: '/api/customers',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ body, actor }) => {
        expectFields(body, ['name'], ['email']);
        return { status: 201, json: await createCustomer(deps.db, { name: asString(body.name, 'name'), email: asOptionalEmail(body.email) }, context(actor)) };
      },
    },
    { method: 'GET', path: '/api/customers/:id', access: 'admin', scope: 'read', handle: async ({ params }) => ({ json: await getCustomerSummary(deps.db, params.id!, now()) }) },
    {
      method: 'PATCH',
      path: '/api/customers/:id',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, [], ['name', 'email']);
        return {
          json: await updateCustomer(deps.db, params.id!, {
            ...(body.name === undefined ? {} : { name: asString(body.name, 'name') }),
            ...(body.email === undefined ? {} : { email: asOptionalEmail(body.email) }),
          }, context(actor)),
        };
      },
    },
    ...(['activate', 'deactivate'] as const).map((verb): Route => ({
      method: 'POST',
      path: `/api/customers/:id/${verb}`,
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, []);
        return { json: await setCustomerActive(deps.db, params.id!, verb === 'activate', context(actor)) };
      },
    })),
    {
      method: 'GET',
      path: '/api/entitlements',
      access: 'admin',
      scope: 'read',
      handle: async (request) => {
        expectQuery(request.query, [...PAGING_QUERY]);
        return listReply(request, 'entitlements', '/api/entitlements', (page) => listEntitlementsPage(deps.db, page));
      },
    },
    {
      method: 'POST',
      path: '/api/entitlements',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ body, actor }) => {
        expectFields(body, ['code', 'name']);
        return { status: 201, json: await createEntitlement(deps.db, { code: asString(body.code, 'code'), name: asString(body.name, 'name') }, context(actor)) };
      },
    },
    {
      method: 'GET',
      path: '/api/licenses',
      access: 'admin',
      scope: 'read',
      handle: async (request) => {
        const q = expectQuery(request.query, [...LICENSE_FILTER_QUERY, ...PAGING_QUERY]);
        const filter = parseLicenseFilters(q);
        // One moment for the whole answer: a CSV export of many pages counts seats and status at the same time.
        const at = now();
        return listReply(request, 'licenses', '/api/licenses', (page) => listLicensesPage(deps.db, { ...filter, ...page }, at), { row: (license) => licenseAsSeenBy(license, request.scopes) });
      },
    },
    {
      method: 'POST',
      path: '/api/licenses',
      access: 'admin',
      scope: 'licenses',
      handle: async ({ body, actor }) => {
        expectFields(body, ['customer_id', 'type', 'valid_until'], ['valid_from', 'entitlements', 'with_decryption_key', 'max_machines', 'floating', 'lease_hours', 'metadata', 'binding']);
        const license = await createLicense(
          deps.db,
          {
            customerId: asString(body.customer_id, 'customer_id'),
            type: asString(body.type, 'type'),
            validFrom: body.valid_from === undefined ? undefined : asString(body.valid_from, 'valid_from'),
            validUntil: asString(body.valid_until, 'valid_until'),
            entitlements: body.entitlements === undefined ? undefined : asGrants(body.entitlements, 'entitlements'),
            withDecryptionKey: asOptionalBoolean(body.with_decryption_key, 'with_decryption_key'),
            ...(body.max_machines === undefined ? {} : { maxMachines: body.max_machines as number | null }),
            ...(body.floating === undefined ? {} : { floating: asOptionalBoolean(body.floating, 'floating')! }),
            ...(body.lease_hours === undefined ? {} : { leaseHours: body.lease_hours as number }),
            ...(body.metadata === undefined ? {} : { metadata: body.metadata as Record<string, string> }),
            ...(body.binding === undefined ? {} : { binding: asString(body.binding, 'binding') }),
          },
          context(actor),
        );
        return { status: 201, json: license };
      },
    },
    {
      method: 'GET',
      path: '/api/licenses/:id',
      access: 'admin',
      scope: 'read',
      // By id only: a license key in a URL would end up in proxy and access logs.
      handle: async ({ params, scopes }) => ({ json: licenseAsSeenBy(await getLicenseView(deps.db, parseUuid(params.id!, 'license id'), now()), scopes) }),
    },
    ...(['activate', 'deactivate'] as const).map((verb): Route => ({
      method: 'POST',
      path: `/api/licenses/:id/${verb}`,
      access: 'admin',
      scope: 'licenses',
      handle: async ({ params, body, actor }) => {
        expectFields(body, []);
        return { json: await setLicenseActive(deps.db, parseUuid(params.id!, 'license id'), verb === 'activate', context(actor)) };
      },
    })),
    {
      method: 'GET',
      path: '/api/audit',
      access: 'admin',
      scope: 'read',
      handle: async (request) => {
        const q = expectQuery(request.query, [...AUDIT_FILTER_QUERY, ...PAGING_QUERY]);
        const filter = parseAuditFilters(q);
        return listReply(request, 'audit', '/api/audit', (page) => listAuditPage(deps.db, { ...filter, ...page }));
      },
    },
  ];
}

function wantsOctetStream(accept: string): boolean {
  return accept.split(',').some((part) => part.split(';')[0]!.trim().toLowerCase() === 'application/octet-stream');
}


function asOptionalBoolean(value: unknown, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new LicenseServerError('INVALID_INPUT', `${name} must be true or false`);
  return value;
}

/** A contact email: a string, or null (or "") for none. */
function asOptionalEmail(value: unknown): string | null | undefined {
  if (value === undefined || value === null) return value;
  if (typeof value !== 'string') throw new LicenseServerError('INVALID_INPUT', 'email must be a string or null');
  return value;
}
