import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { Database } from '../lib/storage/types.js';

/**
 * How long a command line spends delivering what it raised before it exits: one attempt
 * each, within this time in all. What is left stays in the outbox for `serve`, or for the
 * next command that raises something.
 */
export const CLI_DELIVERY_WAIT_MS = 5000;

/**
 * Collects the deliveries this command raises (outbox.ts onRaised). `deliver` then sends
 * them, and any others already due, once each within CLI_DELIVERY_WAIT_MS, and returns one
 * warning line per delivery still pending or failed. Never throws: a notification must not
 * change the result or the exit code of the command that raised it.
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
        const { delivererFor } = await import('../lib/notifications/from-config.js');
        const deliverer = delivererFor(() => db, () => config, () => undefined);
        const deadline = Date.now() + CLI_DELIVERY_WAIT_MS;
        const outcomes = await deliverer.deliverDue({ ids: raised, deadline });
        // Others already due, which an earlier command left and no daemon has sent, with the time that is left.
        if (Date.now() < deadline) await deliverer.deliverDue({ deadline });
        const attempted = new Map(outcomes.map((outcome) => [outcome.id, outcome]));
        const warnings: string[] = [];
        for (const id of raised) {
          const outcome = attempted.get(id);
          const target = outcome ? (outcome.channel === 'webhook' ? `webhook ${JSON.stringify(outcome.target)}` : `email to ${outcome.target}`) : undefined;
          if (!outcome) warnings.push(`notification ${id} is pending: it was left for \`serve\` or the next command (notifications deliveries)`);
          else if (outcome.status === 'pending') warnings.push(`${outcome.event} to ${target} is pending (${outcome.error ?? 'not delivered'}); it will be retried from ${outcome.next_attempt_at} by \`serve\` or the next command (delivery ${id})`);
          else if (outcome.status === 'failed') warnings.push(`${outcome.event} to ${target} failed and will not be retried: ${outcome.error ?? 'not delivered'} (delivery ${id}; notifications redeliver)`);
        }
        return warnings;
      } catch (error) {
        return [`notifications raised by this command were not sent now (${error instanceof Error ? error.message : String(error)}); they stay pending for \`serve\` or the next command`];
      }
    },
  };
}
