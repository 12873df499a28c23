import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { Deliverer, DeliveryOutcome } from '../lib/notifications/deliverer.js';
import type { Database } from '../lib/storage/types.js';
import { CLI_DELIVERY_WAIT_MS } from './deliver-raised.js';

/** What came of a delivery: this process's attempt, or where it stands after another's. */
export type Settled = DeliveryOutcome & { readonly inFlight?: boolean };

/**
 * One attempt at each of `ids` that is due and not claimed by another process, within the
 * command line's delivery budget: what `notifications redeliver` does instead of leaving the
 * delivery for `serve`'s next poll. See settle() for an id a daemon claimed first.
 */
export async function deliverNow(db: Database, config: ResolvedConfig, ids: readonly string[]): Promise<Settled[]> {
  const { delivererFor } = await import('../lib/notifications/from-config.js');
  const deliverer = delivererFor(() => db, () => config, () => undefined);
  const deadline = Date.now() + CLI_DELIVERY_WAIT_MS;
  return [...(await settle(deliverer, await deliverer.deliverDue({ ids, deadline }), ids, deadline)).values()];
}

/**
 * What came of each of `ids`, given the outcomes of this process's own attempts. An id it did
 * not attempt was taken by another process (a `serve` polling the outbox may claim a
 * delivery between the command's commit and its own claim): its result is read from the
 * outbox, waiting until `deadline` while that process's attempt is under way, and one whose
 * claim lapsed unsent is attempted here. So a command beside a daemon says the same as one
 * alone: nothing for a delivery made, the attempt's error and next retry for one that failed.
 * An id no longer in the outbox is left out.
 */
export async function settle(deliverer: Deliverer, attempted: readonly DeliveryOutcome[], ids: readonly string[], deadline: number): Promise<Map<string, Settled>> {
  const settled = new Map<string, Settled>(attempted.map((outcome) => [outcome.id, outcome]));
  let left = ids.filter((id) => !settled.has(id));
  while (left.length > 0) {
    const states = await deliverer.standing(left);
    const late = Date.now() >= deadline;
    for (const state of states) {
      const answered = state.status !== 'pending' || (!state.inFlight && state.attempts > 0);
      if (answered || late) settled.set(state.id, state);
    }
    const present = new Set(states.map((state) => state.id));
    left = left.filter((id) => present.has(id) && !settled.has(id));
    if (left.length === 0) break;
    const free = states.filter((state) => left.includes(state.id) && !state.inFlight).map((state) => state.id);
    const ours = free.length === 0 ? [] : await deliverer.deliverDue({ ids: free, deadline });
    for (const outcome of ours) settled.set(outcome.id, outcome);
    if (ours.length === 0) await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(50, deadline - Date.now()))));
  }
  return settled;
}
