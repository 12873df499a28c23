import type { RouteDependencies } from '../route-dependencies.js';
import { releaseSeat, validateOnline } from '../../lib/licensing/online-validation.js';
import { recordUsage } from '../../lib/licensing/usage.js';
import { expectFields } from '../fields.js';
import { refusalOrError, validationOutcome } from '../metrics.js';
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
        try {
          expectFields(body, ['license_key', 'hardware_id', 'version'], ['machine_name', 'previous_hardware_id']);
          const answer = await validateOnline(deps.db, body as never, {
            actor,
            clock,
            issuer: deps.settings.issuer,
            graceHours: deps.settings.grace.hours,
          });
          deps.metrics?.validation(validationOutcome({ answer }));
          return { json: answer };
        } catch (error) {
          deps.metrics?.validation(validationOutcome({ error }));
          throw error;
        }
      },
    },
    {
      method: 'POST',
      path: '/api/v1/usage',
      access: 'client',
      handle: async ({ body }) => {
        try {
          expectFields(body, ['license_key', 'hardware_id', 'entitlement_code', 'quantity', 'occurred_at', 'idempotency_key']);
          const answer = await recordUsage(deps.db, body as never, { clock });
          deps.metrics?.usageReport(answer.replayed ? 'replayed' : 'recorded');
          return { status: answer.replayed ? 200 : 201, json: answer };
        } catch (error) {
          deps.metrics?.usageReport(refusalOrError(error));
          throw error;
        }
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
