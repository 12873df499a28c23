import { api, type ServeProcess } from './serve.js';

/** A write the load generator saw acknowledged, and when. */
export interface Acknowledged {
  readonly kind: 'license' | 'checkout' | 'activation';
  /** The license's id, or the machine's hardware ID. */
  readonly id: string;
  readonly at: number;
  readonly licenseFile?: string;
}

/**
 * The host-loss tests' load (issue 37): three clients, each in a loop until `stopped`, making
 * licenses, checkouts and activations, each pausing `paceMs` between its requests, and
 * recording each acknowledged write. Requests that fail (the daemon killed under them) are
 * not acknowledged and not recorded.
 */
export async function loadUntil(serve: ServeProcess, customerId: string, license: { id: string; key: string }, stopped: () => boolean, paceMs: number, token = serve.token!): Promise<Acknowledged[]> {
  const acknowledged: Acknowledged[] = [];
  const pause = () => new Promise((resolve) => setTimeout(resolve, paceMs));
  const quietly = <T>(request: Promise<T>) => request.catch(() => undefined);
  const creations = async () => {
    while (!stopped()) {
      const answer = await quietly(api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customerId, type: 'time_based', valid_until: '2099-12-31' } }));
      if (answer?.status === 201) acknowledged.push({ kind: 'license', id: answer.body.id, at: Date.now() });
      await pause();
    }
  };
  let n = 0;
  const checkouts = async () => {
    while (!stopped()) {
      const hardwareId = `checkout-${(n += 1)}`;
      const answer = await quietly(api(serve.url, 'POST', `/api/licenses/${license.id}/checkout`, { token, body: { ttl_days: 30, hardware_id: hardwareId } }));
      if (answer?.status === 200) acknowledged.push({ kind: 'checkout', id: hardwareId, at: Date.now(), licenseFile: answer.body.license_file });
      await pause();
    }
  };
  let m = 0;
  const activations = async () => {
    while (!stopped()) {
      const hardwareId = `activation-${(m += 1)}`;
      const answer = await quietly(api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: hardwareId, version: '1.0.0' } }));
      if (answer?.status === 200 && answer.body.valid === true) acknowledged.push({ kind: 'activation', id: hardwareId, at: Date.now() });
      await pause();
    }
  };
  await Promise.all([creations(), checkouts(), activations()]);
  return acknowledged;
}
