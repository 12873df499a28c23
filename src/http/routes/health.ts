import type { RouteDependencies } from '../app.js';
import { LicenseServerError } from '../../lib/errors.js';
import { findSigningKey } from '../../lib/signing-keys/keys.js';
import type { Route } from '../router.js';

export function healthRoutes(deps: RouteDependencies): Route[] {
  return [
    { method: 'GET', path: '/healthz', access: 'public', handle: async () => ({ json: { status: 'ok' } }) },
    {
      method: 'GET',
      path: '/readyz',
      access: 'public',
      // Ready = the database answers and holds the signing key: everything a request needs.
      handle: async () => {
        const key = await findSigningKey(deps.db);
        if (!key) throw new LicenseServerError('DATABASE_UNAVAILABLE', 'the signing key is not loaded');
        return { json: { status: 'ready' } };
      },
    },
  ];
}
