import { readAttention } from '../../lib/attention.js';
import { expectQuery } from '../fields.js';
import type { RouteDependencies } from '../route-dependencies.js';
import type { Route } from '../router.js';

/**
 * What needs an operator now (lib/attention.ts): the console's home page reads it, and each
 * count links to the list of its records. `read`, as the lists it links to.
 */
export function attentionRoutes(deps: RouteDependencies): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/attention',
      access: 'admin',
      scope: 'read',
      handle: async ({ query }) => {
        expectQuery(query, []);
        const { backup } = deps.settings;
        const background = deps.metrics?.freshStoreFigures();
        return {
          json: await readAttention(deps.db, {
            at: deps.clock(),
            ...(background === undefined ? {} : { background: { at: background.readAt, counts: background.figures.attention } }),
            targets: backup.targets.map((target) => target.name),
            ...(backup.maxAgeMs === undefined ? {} : { backupMaxAgeMs: backup.maxAgeMs }),
          }),
        };
      },
    },
  ];
}
