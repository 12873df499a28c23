import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { Database } from '../lib/storage/types.js';
import type { Settled } from './deliver-now.js';

/**
 * How long a command line spends delivering what it raised before it exits: one attempt
 * each, within this time in all. What is left stays in the outbox for `serve`, or for the
 * next command that raises something.
 */
export const CLI_DELIVERY_WAIT_MS = 5000;

/**
 * Collects the deliveries this command raises (outbox.ts onRaised). `deliver` then sends
 * them, and any others already due, once each within CLI_DELIVERY_WAIT_MS, and returns one
 * warning line per delivery still pending or failed (docs/notifications.md, "Command
 * lines"), whoever attempted it: a daemon may have sent it first. Nothing for a delivery
 * made. Never throws: a notification must not change the result or the exit code of the
 * command that raised it.
 */
export async function collectRaised(): Promise<{ deliver(db: Database, config: ResolvedConfig): Promise<string[]>; stop(): void }> {
  const { onRaised } = await import('../lib/notifications/outbox.js');
  const raised: string[] = [];
  const stop = onRaised((ids) => raised.push(...ids));
  return {
    stop,
    async deliver(db, config) {
      stop();
      if (raised.length === 0) return [];
      try {
        const [{ delivererFor }, { settle }] = await Promise.all([import('../lib/notifications/from-config.js'), import('./deliver-now.js')]);
        const deliverer = delivererFor(() => db, () => config, () => undefined);
        const deadline = Date.now() + CLI_DELIVERY_WAIT_MS;
        const outcomes = await deliverer.deliverDue({ ids: raised, deadline });
        // Others already due, which an earlier command left and no daemon has sent, with the time that is left.
        if (Date.now() < deadline) await deliverer.deliverDue({ deadline });
        const settled = await settle(deliverer, outcomes, raised, deadline);
        return raised.map((id) => settled.get(id)).flatMap((outcome) => (outcome === undefined ? [] : warningFor(outcome)));
      } catch (error) {
        return [`notifications raised by this command were not sent now (${error instanceof Error ? error.message : String(error)}); they stay pending for \`serve\` or the next command`];
      }
    },
  };
}

/** The line a delivery not made deserves, in the forms docs/notifications.md shows; none for one made. */
export function warningFor(outcome: Settled): string[] {
  const what = `${outcome.event} to ${outcome.channel === 'webhook' ? `webhook ${JSON.stringify(outcome.target)}` : `email to ${outcome.target}`}`;
  if (outcome.status === 'delivered') return [];
  if (outcome.status === 'failed') return [`${what} failed and will not be retried: ${outcome.error ?? 'not delivered'} (delivery ${outcome.id}; notifications redeliver)`];
  if (outcome.inFlight) return [`${what} is pending (another process is sending it and had no answer yet); \`serve\` retries it if that attempt fails (delivery ${outcome.id})`];
  if (outcome.attempts === 0) return [`${what} is pending (not attempted within the command's ${CLI_DELIVERY_WAIT_MS / 1000} s); \`serve\` or the next command sends it (delivery ${outcome.id})`];
  return [`${what} is pending (${outcome.error ?? 'not delivered'}); it will be retried from ${outcome.next_attempt_at} by \`serve\` or the next command (delivery ${outcome.id})`];
}
