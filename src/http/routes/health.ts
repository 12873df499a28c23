import type { RouteDependencies } from '../app.js';
import { LicenseServerError } from '../../lib/errors.js';
import { findSigningKey } from '../../lib/signing-keys/keys.js';
import { getSigner } from '../../lib/signing-keys/signer.js';
import type { Route } from '../router.js';

export function healthRoutes(deps: RouteDependencies): Route[] {
  return [
    { method: 'GET', path: '/healthz', access: 'public', handle: async () => ({ json: { status: 'ok' } }) },
    {
      method: 'GET',
      path: '/readyz',
      access: 'public',
      // Ready = the database answers and holds the signing key, and this daemon can open it as
      // stored now (sealed by a protect since it started, it may lack the key-encryption key).
      handle: async () => {
        const key = await findSigningKey(deps.db);
        if (!key) throw new LicenseServerError('DATABASE_UNAVAILABLE', 'the signing key is not loaded');
        await getSigner(deps.db).catch((error: unknown) => {
          if (!(error instanceof LicenseServerError) || !error.code.startsWith('SIGNING_')) throw error;
          throw new LicenseServerError('DATABASE_UNAVAILABLE', `this daemon cannot sign: ${error.message}`);
        });
        return { json: { status: 'ready' } };
      },
    },
  ];
}
