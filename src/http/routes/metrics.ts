import type { RouteDependencies } from '../route-dependencies.js';
import { METRICS_CONTENT_TYPE } from '../metrics.js';
import type { Route } from '../router.js';

/**
 * GET /metrics on the main listener: the Prometheus text format, for a token with the scope
 * `metrics` (or `admin`). The listener of server.metrics_port serves the same without a
 * token (metrics-listener.ts). docs/metrics.md.
 */
export function metricsRoutes(deps: RouteDependencies): Route[] {
  return [
    {
      method: 'GET',
      path: '/metrics',
      access: 'admin',
      scope: 'metrics',
      handle: async () => ({ raw: await deps.metrics!.render(), contentType: METRICS_CONTENT_TYPE }),
    },
  ];
}
