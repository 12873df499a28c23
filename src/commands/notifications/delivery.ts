import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { formatDelivery } from '../../cli/delivery-output.js';
import type { Delivery } from '../../lib/notifications/deliveries.js';

export default class NotificationsDelivery extends BaseCommand<typeof NotificationsDelivery> {
  static override description = 'Show one delivery of the notification outbox with its data (the event as its webhook body carries it).';
  static override args = { id: Args.string({ description: 'Delivery id (UUID), from `notifications deliveries`.', required: true }) };

  async run(): Promise<Delivery> {
    const { showDelivery } = await import('../../lib/notifications/deliveries.js');
    const delivery = await this.withDatabase((db) => showDelivery(db, this.args.id));
    this.say(formatDelivery(delivery));
    return delivery;
  }
}
