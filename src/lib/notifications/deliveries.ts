import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import type { Keyset, ListFilters } from '../cursor.js';
import { LicenseServerError } from '../errors.js';
import { countRows, fetchPage, pageQuery, unindexedText, type ListCount, type ListPage, type Page, type PageQuery } from '../paging.js';
import type { Database, Queryable, Row, SqlValue } from '../storage/types.js';
import { asInt, asIntOrNull, asIso, asIsoOrNull, asJson } from '../storage/values.js';
import { describe, parseUuid } from '../validate.js';
import { CUSTOMER_RECIPIENT, customerOf, NO_CUSTOMER_EMAIL } from './outbox.js';
import { readNotificationSettings } from './settings.js';

/**
 * What the outbox holds, as operators see it (`notifications deliveries`, the REST API, the
 * admin page), and the one change they may make to it: a redelivery. The outbox itself is
 * written by outbox.ts and worked by deliverer.ts.
 */

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface Delivery {
  readonly id: string;
  readonly event_id: string;
  readonly event: string;
  readonly channel: 'webhook' | 'email';
  /** The webhook's name, or the email address. */
  readonly target: string;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly last_attempt_at: string | null;
  /** The receiver's HTTP status at the last attempt, when it answered. */
  readonly last_status: number | null;
  readonly last_error: string | null;
  /** When the next attempt is due; null unless pending. */
  readonly next_attempt_at: string | null;
  readonly delivered_at: string | null;
  readonly occurred_at: string;
  readonly created_at: string;
  /** The event's data, as the webhook body carries it. */
  readonly data: Record<string, unknown>;
}

export interface DeliveryConditions {
  readonly status?: DeliveryStatus;
  readonly event?: string;
  /**
   * true: pending deliveries that were tried and failed, waiting for their next attempt (a
   * webhook retrying against a dead URL); false: the others. Given up ones are `failed`.
   */
  readonly retrying?: boolean;
}

export interface DeliveryFilter extends Page, DeliveryConditions {}

/**
 * Newest first, by when the delivery was written: each filter has an index ending in
 * `created_at, id` (migration 7), so a page at any depth is read from an index in order.
 */
export const DELIVERIES_KEYSET: Keyset = {
  list: 'deliveries',
  keys: [{ column: 'created_at', field: 'created_at', kind: 'timestamp' }, { column: 'id', field: 'id', kind: 'uuid' }],
  descending: true,
};

const COLUMNS = 'id, event_id, event, channel, target, status, attempts, last_attempt_at, last_status, last_error, next_attempt_at, delivered_at, occurred_at, created_at, data';

export function checkDeliveryStatus(value: string | undefined): DeliveryStatus | undefined {
  if (value === undefined) return undefined;
  if (!(DELIVERY_STATUSES as readonly string[]).includes(value)) {
    throw new LicenseServerError('INVALID_INPUT', `status must be one of ${DELIVERY_STATUSES.join(', ')}, got ${describe(value)}`);
  }
  return value as DeliveryStatus;
}

export function deliveryListQuery(filter: DeliveryFilter = {}): PageQuery {
  const { where, params, filters } = deliveryWhere(filter);
  return pageQuery(`SELECT ${COLUMNS} FROM notification_deliveries`, where, params, DELIVERIES_KEYSET, filters, filter);
}

/** How many deliveries the filter selects (exact up to paging.ts COUNT_BOUND). */
export async function countDeliveries(db: Queryable, conditions: DeliveryConditions = {}, bound?: number): Promise<ListCount> {
  const { where, params } = deliveryWhere(conditions);
  return countRows(db, 'FROM notification_deliveries', where, params, bound);
}

function deliveryWhere(filter: DeliveryConditions): { where: string[]; params: SqlValue[]; filters: ListFilters } {
  const status = checkDeliveryStatus(filter.status);
  const where: string[] = [];
  const params: SqlValue[] = [];
  // With both filters the status index is walked and the event checked per row: failed and
  // pending deliveries are the few an operator looks for, and the engines have no index on both.
  if (status !== undefined) {
    where.push('status = ?');
    params.push(status);
  }
  if (filter.event !== undefined) {
    where.push(`${status === undefined ? 'event' : unindexedText('event')} = ?`);
    params.push(filter.event);
  }
  // Retrying ones are pending: read by the status index, their attempts checked per row.
  if (filter.retrying === true) {
    where.push(`${status === undefined ? 'status' : unindexedText('status')} = ? AND attempts > ?`);
    params.push('pending', 0);
  } else if (filter.retrying === false) {
    where.push("NOT (status = ? AND attempts > ?)");
    params.push('pending', 0);
  }
  return { where, params, filters: { status, event: filter.event, retrying: filter.retrying } };
}

export async function listDeliveriesPage(db: Queryable, filter: DeliveryFilter = {}): Promise<ListPage<Delivery>> {
  return fetchPage(db, deliveryListQuery(filter), toDelivery);
}

/** One page (100 deliveries when no limit is given), newest first. */
export async function listDeliveries(db: Queryable, filter: DeliveryFilter = {}): Promise<Delivery[]> {
  return (await listDeliveriesPage(db, filter)).items;
}

export async function showDelivery(db: Queryable, id: string): Promise<Delivery> {
  const rows = await db.query(`SELECT ${COLUMNS} FROM notification_deliveries WHERE id = ?`, [parseUuid(id, 'delivery id')]);
  if (rows.length === 0) throw notFound(id);
  return toDelivery(rows[0]!);
}

/**
 * Makes a delivery pending again, due now, with a fresh retry window: a delivered one to send
 * it again, a failed one to try it again once the receiver is fixed, a pending one to try it
 * now rather than at its next attempt. The id stays (receivers drop duplicates by it) and so
 * do its attempts. A claim a process holds on it is cleared: that process's outcome is then
 * not recorded (deliverer.ts fences its record by the claim), and whoever claims it next sends
 * it. A webhook delivery goes to the webhook of its name as configured now; one to a
 * customer who had no contact email goes to the address the customer has now. Audited as
 * `notification.redelivered`, in the transaction of the change.
 */
export async function redeliver(db: Database, id: string, context: OperationContext): Promise<Delivery> {
  const deliveryId = parseUuid(id, 'delivery id');
  const lock = db.engine === 'postgres' ? ' FOR UPDATE' : '';
  return db.transaction(async (tx) => {
    const rows = await tx.query(`SELECT ${COLUMNS} FROM notification_deliveries WHERE id = ?${lock}`, [deliveryId]);
    if (rows.length === 0) throw notFound(deliveryId);
    const before = toDelivery(rows[0]!);
    const target = await currentTarget(tx, before);
    const at = now(context).toISOString();
    await tx.execute(
      `UPDATE notification_deliveries SET status = 'pending', target = ?, next_attempt_at = ?, retry_from = ?, claimed_by = NULL, claimed_until = NULL, delivered_at = NULL
       WHERE id = ?`,
      [target, at, at, deliveryId],
    );
    await recordAudit(tx, context, {
      action: 'notification.redelivered',
      entityType: 'notification_delivery',
      entityId: deliveryId,
      details: { event: before.event, channel: before.channel, target, previous_status: before.status, attempts: before.attempts },
    });
    return { ...before, status: 'pending', target, next_attempt_at: at, delivered_at: null };
  });
}

/** Where a redelivery goes, refused when nothing would take it. */
async function currentTarget(tx: Queryable, delivery: Delivery): Promise<string> {
  const refuse = (why: string) => new LicenseServerError('DELIVERY_TARGET_GONE', `delivery ${delivery.id} cannot be sent again: ${why}`);
  if (delivery.channel === 'webhook') {
    const hook = (await readNotificationSettings(tx)).webhooks.find((candidate) => candidate.name === delivery.target);
    if (!hook) throw refuse(`webhook ${JSON.stringify(delivery.target)} is no longer defined`);
    if (!hook.enabled) throw refuse(`webhook ${JSON.stringify(delivery.target)} is disabled`);
    return delivery.target;
  }
  if (delivery.target !== CUSTOMER_RECIPIENT) return delivery.target;
  const address = (await customerOf(tx, delivery.data))?.email;
  if (!address) throw refuse(NO_CUSTOMER_EMAIL);
  return address;
}


function notFound(id: string): LicenseServerError {
  return new LicenseServerError('DELIVERY_NOT_FOUND', `no notification delivery ${describe(id)}`);
}

function toDelivery(row: Row): Delivery {
  const status = String(row.status) as DeliveryStatus;
  return {
    id: String(row.id),
    event_id: String(row.event_id),
    event: String(row.event),
    channel: row.channel === 'email' ? 'email' : 'webhook',
    target: String(row.target),
    status,
    attempts: asInt(row.attempts),
    last_attempt_at: asIsoOrNull(row.last_attempt_at),
    last_status: asIntOrNull(row.last_status),
    last_error: row.last_error === null || row.last_error === undefined ? null : String(row.last_error),
    next_attempt_at: status === 'pending' ? asIso(row.next_attempt_at) : null,
    delivered_at: asIsoOrNull(row.delivered_at),
    occurred_at: asIso(row.occurred_at),
    created_at: asIso(row.created_at),
    data: asJson(row.data),
  };
}
