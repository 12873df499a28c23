import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { DeliveryOutcome } from '../lib/notifications/deliverer.js';
import type { Database } from '../lib/storage/types.js';
import { CLI_DELIVERY_WAIT_MS } from './deliver-raised.js';

/**
 * One attempt at each of `ids` that is due and not claimed by another process, within the
 * command line's delivery budget: what `notifications redeliver` does instead of leaving the
 * delivery for `serve`'s next poll. An id a daemon claimed first has no outcome here.
 */
export async function deliverNow(db: Database, config: ResolvedConfig, ids: readonly string[]): Promise<DeliveryOutcome[]> {
  const { delivererFor } = await import('../lib/notifications/from-config.js');
  const deliverer = delivererFor(() => db, () => config, () => undefined);
  return deliverer.deliverDue({ ids, deadline: Date.now() + CLI_DELIVERY_WAIT_MS });
}
