import { randomUUID } from 'node:crypto';
import { now, type OperationContext } from '../context.js';
import type { Queryable } from '../storage/types.js';
import { asBool } from '../storage/values.js';
import { patternsSelecting, type EventName } from './events.js';

/** What a rule's `email: customer` sends to: the contact email of the event's own customer. */
export const CUSTOMER_RECIPIENT = 'customer';

/** Why a delivery to `email: customer` could not be made; it is recorded as failed. */
export const NO_CUSTOMER_EMAIL = 'the customer has no contact email (customer update --email)';

type RaisedListener = (ids: readonly string[]) => void;
const listeners = new Set<RaisedListener>();

/**
 * Tells `listener` the ids of the deliveries this process writes to the outbox, before their
 * transaction commits: the command line collects them to deliver before it exits, the daemon
 * wakes its deliverer (which finds them once committed). Returns the way to stop listening.
 */
export function onRaised(listener: RaisedListener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/**
 * Writes one outbox row for each target the enabled alert rules select for `event`: one per
 * enabled webhook, one per email address. Called inside the transaction of the change the
 * event reports, so that the notification exists exactly when the change does; nothing is
 * sent here (deliverer.ts sends). Returns the new deliveries' ids.
 *
 * It costs about one insert, as it runs in every license creation, renewal and checkout: one
 * query reads the rules that select this event (none: done), with their webhooks and the
 * event's customer, and one INSERT writes every delivery. Nothing is cached, so a `set` by
 * another process counts from the next event.
 *
 * `data` is stored as the JSON text the webhook body will carry, byte for byte on every
 * retry. The event's customer (from `data.customer_id`, or the license of `data.license_id`)
 * adds `customer_id` and `customer_name` to data that lacks them, and is where a rule
 * sending to `customer` sends: the address at the time of the event. With no address known
 * the delivery is recorded as failed, so that `notifications deliveries --failed` shows it.
 */
export async function raiseEvent(
  tx: Queryable,
  event: EventName,
  data: Record<string, unknown>,
  context?: Pick<OperationContext, 'clock'>,
): Promise<string[]> {
  const patterns = patternsSelecting(event);
  const givenCustomer = isUuid(data.customer_id) ? String(data.customer_id) : null;
  // The customer is joined only for an event that names one: backup and signing-key events do
  // not, and are raised on stores of any schema (a backup of a store an older release left,
  // before customers had an email).
  const rules = await tx.query(
    `SELECT r.email_to, w.name AS webhook, w.enabled AS webhook_enabled${givenCustomer === null ? '' : ', c.id AS customer_id, c.name AS customer_name, c.email AS customer_email'}
     FROM notification_alert_rules r
     LEFT JOIN notification_webhooks w ON w.id = r.webhook_id${givenCustomer === null ? '' : '\n     LEFT JOIN customers c ON c.id = ?'}
     WHERE r.enabled = ? AND r.event IN (${patterns.map(() => '?').join(', ')})`,
    [...(givenCustomer === null ? [] : [givenCustomer]), true, ...patterns],
  );
  if (rules.length === 0) return [];
  // Data that names a license but not its customer (a caller holding only the license's id).
  const customer = givenCustomer !== null ? customerOfRow(rules[0]!) : await customerOf(tx, data);
  const targets: Array<{ channel: 'webhook' | 'email'; target: string; failure?: string }> = [];
  const seen = new Set<string>();
  const add = (channel: 'webhook' | 'email', target: string, failure?: string) => {
    const key = `${channel}\u0000${target.toLowerCase()}`;
    if (seen.has(key)) return;
    seen.add(key);
    targets.push({ channel, target, ...(failure === undefined ? {} : { failure }) });
  };
  for (const rule of rules) {
    if (rule.webhook !== null && rule.webhook !== undefined && asBool(rule.webhook_enabled)) add('webhook', String(rule.webhook));
    const email = rule.email_to === null || rule.email_to === undefined ? undefined : String(rule.email_to);
    if (email === CUSTOMER_RECIPIENT) {
      if (customer?.email) add('email', customer.email);
      else add('email', CUSTOMER_RECIPIENT, NO_CUSTOMER_EMAIL);
    } else if (email) {
      add('email', email);
    }
  }
  if (targets.length === 0) return [];
  const at = now(context).toISOString();
  const eventId = randomUUID();
  const body = JSON.stringify(customer && data.customer_name === undefined ? { ...data, customer_id: customer.id, customer_name: customer.name } : data);
  const ids = targets.map(() => randomUUID());
  await tx.execute(
    `INSERT INTO notification_deliveries (id, event_id, event, occurred_at, data, channel, target, status, attempts, next_attempt_at, retry_from, last_error, created_at)
     VALUES ${targets.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)').join(', ')}`,
    targets.flatMap((target, i) => [ids[i]!, eventId, event, at, body, target.channel, target.target, target.failure ? 'failed' : 'pending', at, at, target.failure ?? null, at]),
  );
  const pending = ids.filter((_, i) => !targets[i]!.failure);
  if (pending.length > 0) for (const listener of listeners) listener(pending);
  return ids;
}

function isUuid(value: unknown): boolean {
  return typeof value === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
}

function customerOfRow(row: Record<string, unknown>): { id: string; name: string; email: string | undefined } | undefined {
  if (row.customer_id === null || row.customer_id === undefined) return undefined;
  const email = typeof row.customer_email === 'string' && row.customer_email.length > 0 ? row.customer_email : undefined;
  return { id: String(row.customer_id), name: String(row.customer_name), email };
}

/** The event's customer: `data.customer_id`, or the customer of the license `data.license_id`. */
export async function customerOf(tx: Queryable, data: Record<string, unknown>): Promise<{ id: string; name: string; email: string | undefined } | undefined> {
  // Ids come from the server's own records, but a malformed one must not fail the change it reports.
  const uuid = isUuid;
  let rows: Array<Record<string, unknown>> = [];
  if (uuid(data.customer_id)) rows = await tx.query('SELECT id, name, email FROM customers WHERE id = ?', [String(data.customer_id)]);
  else if (uuid(data.license_id)) rows = await tx.query('SELECT c.id, c.name, c.email FROM licenses l JOIN customers c ON c.id = l.customer_id WHERE l.id = ?', [String(data.license_id)]);
  const row = rows[0];
  if (!row) return undefined;
  const email = typeof row.email === 'string' && row.email.length > 0 ? row.email : undefined;
  return { id: String(row.id), name: String(row.name), email };
}
