import { scopeAllows, type Scope } from '../../lib/admin-tokens.js';
import type { Route } from '../router.js';

/**
 * Who is asking, and every admin route the token may call ("POST /api/licenses/{id}/renew"),
 * from the route table itself: the console shows an action only when its route is listed, so
 * what the page offers and what the server allows cannot drift apart.
 */
export function whoamiRoutes(table: () => readonly Route[]): Route[] {
  let cached: ReadonlyArray<{ name: string; scope: Scope | 'any' }> | undefined;
  const adminRoutes = () =>
    (cached ??= table()
      .filter((route) => route.access === 'admin')
      .map((route) => ({ name: `${route.method} ${route.path.replace(/:(\w+)/g, '{$1}')}`, scope: route.scope ?? 'admin' })));
  return [
    {
      method: 'GET',
      path: '/api/whoami',
      access: 'admin',
      scope: 'any',
      handle: async ({ actor, scopes }) => ({
        json: {
          actor,
          scopes,
          routes: adminRoutes().filter((route) => route.scope === 'any' || scopeAllows(scopes as Scope[], route.scope)).map((route) => route.name),
        },
      }),
    },
  ];
}
