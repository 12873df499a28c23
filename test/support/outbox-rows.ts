import { DEFAULT_RETRY, Deliverer, type DelivererOptions } from '../../src/lib/notifications/deliverer.js';
import { replaceNotificationSettings } from '../../src/lib/notifications/settings.js';
import type { Database } from '../../src/lib/storage/types.js';

export interface DeliveryRow {
  readonly event: string;
  readonly event_id: string;
  readonly channel: string;
  readonly target: string;
  readonly status: string;
  readonly data: Record<string, any>;
  /** The data as stored: what a webhook body carries. */
  readonly body: string;
}

/** The outbox's rows, oldest first, optionally of one event and one channel. */
export async function deliveries(db: Database, event?: string, channel: 'webhook' | 'email' = 'webhook'): Promise<DeliveryRow[]> {
  const rows = await db.query(
    `SELECT event, event_id, channel, target, status, data FROM notification_deliveries WHERE channel = ?${event ? ' AND event = ?' : ''} ORDER BY created_at, id`,
    event ? [channel, event] : [channel],
  );
  return rows.map((row) => ({
    event: String(row.event),
    event_id: String(row.event_id),
    channel: String(row.channel),
    target: String(row.target),
    status: String(row.status),
    data: JSON.parse(String(row.data)),
    body: String(row.data),
  }));
}

/**
 * Settings under which every event writes one webhook delivery (to a port nobody delivers
 * to in these tests: the rows are what is checked), and the events named also one email to
 * the event's customer.
 */
export async function everyEventToWebhook(db: Database, customerEmailFor: readonly string[] = []): Promise<void> {
  await replaceNotificationSettings(db, {
    webhooks: [{ name: 'ops', url: 'http://127.0.0.1:9/hook', secret: 'test-secret' }],
    rules: [{ event: '*', webhook: 'ops' }, ...customerEmailFor.map((event) => ({ event, email: 'customer' }))],
  }, { actor: 'test' });
}

/** The database, except that every transaction rolls back after its work succeeded. */
export function rollingBack(db: Database): Database {
  return new Proxy(db, {
    get(target, property) {
      if (property === 'transaction') {
        return (fn: Parameters<Database['transaction']>[0]) => target.transaction(async (tx) => {
          await fn(tx);
          throw new Error('rolled back on purpose');
        });
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * A deliverer over `db` as the daemon makes one, with the default retry schedule, no SMTP
 * relay and no log, unless `more` says otherwise.
 */
export function testDeliverer(db: Database, more: Partial<DelivererOptions> = {}): Deliverer {
  return new Deliverer({
    database: () => db,
    server: () => 'licenses.test',
    retry: () => DEFAULT_RETRY,
    email: () => undefined,
    allowLinkLocal: () => false,
    log: () => undefined,
    ...more,
  });
}
