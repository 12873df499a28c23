import type { RouteDependencies } from '../route-dependencies.js';
import { LicenseServerError } from '../../lib/errors.js';
import { findSigningKey } from '../../lib/signing-keys/keys.js';
import { getSigner } from '../../lib/signing-keys/signer.js';
import type { Route } from '../router.js';

/**
 * /readyz answers within this, whatever the database does: a probe that waits for a
 * database that stopped answering is itself counted as failed (and a supervisor's probe
 * usually gives up after a second), and one that is not answered says nothing of why.
 */
const READY_WITHIN_MS = 800;

export function healthRoutes(deps: RouteDependencies): Route[] {
  return [
    { method: 'GET', path: '/healthz', access: 'public', handle: async () => ({ json: { status: 'ok' } }) },
    {
      method: 'GET',
      path: '/readyz',
      access: 'public',
      // Ready = the database answers and holds the signing key, this daemon can open it as
      // stored now (sealed by a protect since it started, it may lack the key-encryption key),
      // and it takes writes: after a write refused for want of space, not until a probe write
      // went through (storage/write-refusals.ts; nothing is written while none was refused).
      handle: async () => {
        const started = performance.now();
        const key = await answeredWithin(findSigningKey(deps.db), READY_WITHIN_MS);
        if (!key) throw new LicenseServerError('DATABASE_UNAVAILABLE', 'the signing key is not loaded');
        await getSigner(deps.db).catch((error: unknown) => {
          if (!(error instanceof LicenseServerError) || !error.code.startsWith('SIGNING_')) throw error;
          throw new LicenseServerError('DATABASE_UNAVAILABLE', `this daemon cannot sign: ${error.message}`);
        });
        // The admin routes' writes may go through a pool of their own (PostgreSQL).
        for (const db of new Set([deps.db, deps.state.adminWrites])) {
          if (db.checkWrites) await answeredWithin(db.checkWrites(), Math.max(1, READY_WITHIN_MS - (performance.now() - started)));
        }
        return { json: { status: 'ready' } };
      },
    },
  ];
}

/** `work`, or DATABASE_UNAVAILABLE once `ms` have passed (the statement goes on, bounded by the database timeouts). */
function answeredWithin<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LicenseServerError('DATABASE_UNAVAILABLE', `the database did not answer within ${ms} ms`)), ms);
  });
  work.catch(() => undefined);
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
