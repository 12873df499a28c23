import type { Delivery } from '../lib/notifications/deliveries.js';
import { escapeInvisible } from '../lib/validate.js';
import { formatRecord, formatTable } from './output.js';

/** `webhook NAME` or `email ADDRESS`: webhook names and addresses are the operator's, but shown with every byte. */
export function deliveryTarget(delivery: Pick<Delivery, 'channel' | 'target'>): string {
  return `${delivery.channel} ${escapeInvisible(delivery.target)}`;
}

/** An SMTP reply can run to hundreds of characters: a table row shows its start, `delivery ID` all of it. */
const TABLE_ERROR_LENGTH = 60;

/** What the last attempt came to: the receiver's HTTP status, or the error. */
function lastOutcome(delivery: Delivery): string | null {
  if (delivery.last_error !== null) return escapeInvisible(delivery.last_error);
  if (delivery.last_status !== null) return `HTTP ${delivery.last_status}`;
  return null;
}

export function formatDeliveries(deliveries: readonly Delivery[]): string {
  return formatTable(deliveries, [
    { header: 'ID', value: (d) => d.id },
    { header: 'EVENT', value: (d) => d.event },
    { header: 'TARGET', value: deliveryTarget },
    { header: 'STATUS', value: (d) => d.status },
    { header: 'ATTEMPTS', value: (d) => d.attempts },
    { header: 'LAST', value: (d) => shorten(lastOutcome(d)) },
    { header: 'WHEN', value: (d) => d.created_at },
  ]);
}

function shorten(text: string | null): string | null {
  if (text === null || text.length <= TABLE_ERROR_LENGTH) return text;
  return `${text.slice(0, TABLE_ERROR_LENGTH - 1)}…`;
}

export function formatDelivery(delivery: Delivery): string {
  return [
    formatRecord([
      ['id', delivery.id],
      ['event', delivery.event],
      ['event id', delivery.event_id],
      ['target', deliveryTarget(delivery)],
      ['status', delivery.status],
      ['attempts', delivery.attempts],
      ['last attempt', delivery.last_attempt_at],
      ['last outcome', lastOutcome(delivery)],
      ['next attempt', delivery.next_attempt_at],
      ['delivered', delivery.delivered_at],
      ['occurred', delivery.occurred_at],
      ['created', delivery.created_at],
    ]),
    'data:',
    escapeInvisible(JSON.stringify(delivery.data, null, 2)),
  ].join('\n');
}
