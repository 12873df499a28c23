import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatDeliveries } from '../../cli/delivery-output.js';
import { pagingFlags } from '../../cli/flags.js';
import type { Delivery, DeliveryStatus } from '../../lib/notifications/deliveries.js';

const STATUS_FLAGS = ['failed', 'pending', 'delivered'] as const;

export default class NotificationsDeliveries extends BaseCommand<typeof NotificationsDeliveries> {
  static override description = `List the deliveries of the notification outbox, newest first: one per webhook or email an event was sent to, with its status and last attempt.
Show one with its data with \`notifications delivery ID\`; send one again with \`notifications redeliver ID\`.`;
  static override examples = ['<%= config.bin %> notifications deliveries --failed', '<%= config.bin %> notifications deliveries --event backup.failed --json'];
  static override flags = {
    failed: Flags.boolean({ description: 'Only deliveries given up on (failed).', exclusive: ['pending', 'delivered'] }),
    pending: Flags.boolean({ description: 'Only deliveries still to be sent or retried.', exclusive: ['failed', 'delivered'] }),
    delivered: Flags.boolean({ description: 'Only deliveries a receiver accepted.', exclusive: ['failed', 'pending'] }),
    event: Flags.string({ description: 'Only this event, e.g. backup.failed.' }),
    ...pagingFlags,
  };

  async run(): Promise<Delivery[]> {
    const { flags } = this;
    const status: DeliveryStatus | undefined = STATUS_FLAGS.find((name) => flags[name]);
    const { listDeliveriesPage } = await import('../../lib/notifications/deliveries.js');
    const { items, next_cursor } = await this.withDatabase((db) =>
      listDeliveriesPage(db, { status, event: flags.event, limit: flags.limit, offset: flags.offset, cursor: flags.cursor }),
    );
    this.say(formatDeliveries(items));
    this.sayNextPage(next_cursor);
    return items;
  }
}
