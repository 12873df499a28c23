import type { RouteDependencies } from '../route-dependencies.js';
import { checkDeliveryStatus, listDeliveriesPage, redeliver, showDelivery } from '../../lib/notifications/deliveries.js';
import { expectFields, expectQuery, PAGING_QUERY, queryBoolean } from '../fields.js';
import { listReply } from '../list-reply.js';
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
      handle: async (request) => {
        const q = expectQuery(request.query, ['status', 'event', 'retrying', ...PAGING_QUERY]);
        const filter = { status: checkDeliveryStatus(q.status), event: q.event, retrying: queryBoolean(q.retrying, 'retrying') };
        return listReply(request, 'notification-deliveries', '/api/notifications/deliveries', (page) => listDeliveriesPage(deps.db, { ...filter, ...page }));
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
