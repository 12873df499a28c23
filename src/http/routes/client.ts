import type { RouteDependencies } from '../app.js';
import { releaseSeat, validateOnline } from '../../lib/licensing/online-validation.js';
import { recordUsage } from '../../lib/licensing/usage.js';
import { expectFields } from '../fields.js';
import type { Route } from '../router.js';

/** What the client library talks to: no admin token, a license key in the body, rate-limited per address. */
export function clientRoutes(deps: RouteDependencies): Route[] {
  const { clock } = deps;
  return [
    {
      method: 'POST',
      path: '/api/v1/validate',
      access: 'client',
      handle: async ({ body, actor }) => {
        expectFields(body, ['license_key', 'hardware_id', 'version'], ['machine_name']);
        const answer = await validateOnline(deps.db, body as never, {
          actor,
          clock,
          issuer: deps.settings.issuer,
          graceHours: deps.settings.grace.hours,
        });
        return { json: answer };
      },
    },
    {
      method: 'POST',
      path: '/api/v1/usage',
      access: 'client',
      handle: async ({ body }) => {
        expectFields(body, ['license_key', 'hardware_id', 'entitlement_code', 'quantity', 'occurred_at', 'idempotency_key']);
        const answer = await recordUsage(deps.db, body as never, { clock });
        return { status: answer.replayed ? 200 : 201, json: answer };
      },
    },
    {
      method: 'POST',
      path: '/api/v1/release',
      access: 'client',
      handle: async ({ body, actor }) => {
        expectFields(body, ['license_key', 'hardware_id']);
        return { json: await releaseSeat(deps.db, body as never, { actor, clock }) };
      },
    },
  ];
}
