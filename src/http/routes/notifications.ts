import type { RouteDependencies } from '../route-dependencies.js';
import { checkDeliveryStatus, listDeliveriesPage, redeliver, showDelivery } from '../../lib/notifications/deliveries.js';
import { expectFields, expectQuery, pageReply, PAGING_QUERY, queryPage } from '../fields.js';
import type { Route } from '../router.js';

/**
 * The outbox's deliveries. Reading them needs `read`, like the audit log; a redelivery needs
 * `admin`, which alone covers notifications (admin-tokens.ts): it makes the server send an
 * event's data to a webhook or an address again. The daemon's deliverer, polling every 2 s,
 * sends a redelivered delivery; the route has no handle on it to wake it sooner.
 */
export function notificationRoutes(deps: RouteDependencies): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/notifications/deliveries',
      access: 'admin',
      scope: 'read',
      handle: async ({ query }) => {
        const q = expectQuery(query, ['status', 'event', ...PAGING_QUERY]);
        const page = await listDeliveriesPage(deps.db, { status: checkDeliveryStatus(q.status), event: q.event, ...queryPage(q) });
        return pageReply('/api/notifications/deliveries', query, page);
      },
    },
    {
      method: 'GET',
      path: '/api/notifications/deliveries/:id',
      access: 'admin',
      scope: 'read',
      handle: async ({ params }) => ({ json: await showDelivery(deps.db, params.id!) }),
    },
    {
      method: 'POST',
      path: '/api/notifications/deliveries/:id/redeliver',
      access: 'admin',
      scope: 'admin',
      handle: async ({ params, body, actor }) => {
        expectFields(body, []);
        return { json: await redeliver(deps.db, params.id!, { actor, clock: deps.clock }) };
      },
    },
  ];
}
