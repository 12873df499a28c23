import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { deliverNow } from '../../cli/deliver-now.js';
import { deliveryTarget } from '../../cli/delivery-output.js';
import type { Settled } from '../../cli/deliver-now.js';
import type { Delivery } from '../../lib/notifications/deliveries.js';
import { escapeInvisible } from '../../lib/validate.js';

export default class NotificationsRedeliver extends BaseCommand<typeof NotificationsRedeliver> {
  static override description = `Send a delivery of the notification outbox again, under the same delivery id (receivers drop duplicates by it).
It becomes pending with a fresh retry window, and this command makes one attempt now (at most 5 s); if that fails, \`serve\` or the next command retries it. A webhook delivery goes to the webhook of that name as configured now.`;
  static override examples = ['<%= config.bin %> notifications deliveries --failed', '<%= config.bin %> notifications redeliver 0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b'];
  static override args = { id: Args.string({ description: 'Delivery id (UUID), from `notifications deliveries`.', required: true }) };

  async run(): Promise<Delivery> {
    const { redeliver, showDelivery } = await import('../../lib/notifications/deliveries.js');
    const { delivery, outcome } = await this.withDatabase(async (db, config) => {
      const pending = await redeliver(db, this.args.id, this.operationContext());
      let attempted: Settled | undefined;
      try {
        [attempted] = await deliverNow(db, config, [pending.id]);
      } catch (error) {
        // The redelivery stands; sending it is what `serve` and the next command do anyway.
        this.warnLine(`delivery ${pending.id} was not attempted now (${error instanceof Error ? error.message : String(error)})`);
      }
      return { delivery: await showDelivery(db, pending.id), outcome: attempted };
    });
    this.say(describeOutcome(delivery, outcome));
    return delivery;
  }
}

function describeOutcome(delivery: Delivery, outcome: Settled | undefined): string {
  const what = `redelivered ${delivery.id}: ${delivery.event} to ${deliveryTarget(delivery)}`;
  const error = delivery.last_error === null ? '' : ` (${escapeInvisible(delivery.last_error)})`;
  if (delivery.status === 'delivered') return `${what} delivered (attempt ${delivery.attempts})`;
  if (delivery.status === 'failed') return `${what} failed and will not be retried${error}`;
  if (outcome === undefined) return `${what} is pending; it was left for \`serve\` or the next command`;
  if (outcome.inFlight) return `${what} is pending: another process is sending it and had no answer yet; \`serve\` retries it if that attempt fails`;
  return `${what} is pending${error}; it will be retried from ${delivery.next_attempt_at} by \`serve\` or the next command`;
}
