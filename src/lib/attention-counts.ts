import type { ListCount } from './paging.js';
import { countLicenses } from './licensing/licenses.js';
import type { LicenseConditions } from './licensing/license-filters.js';
import { countDeliveries, type DeliveryConditions } from './notifications/deliveries.js';
import type { Queryable } from './storage/types.js';

const DAY = 86_400_000;

/**
 * The counts of records that need an operator (issue 36, "An attention page"), each defined
 * by the filter of the list that shows exactly those records and that list's query string,
 * so that a count, its link and /metrics (store-figures.ts reads the same counts) agree.
 */
export interface AttentionList {
  /** Where the records are listed: the list route and its filters as query parameters. */
  readonly query: string;
  count(db: Queryable, at: Date, bound?: number): Promise<ListCount>;
  /**
   * The count reads more than an index range: every license with a machine limit and its
   * machines (seats are held by time, so no index can say which licenses are full). A daemon
   * answers it from its background read of the store's figures, the read /metrics shows.
   */
  readonly scans?: true;
}

const licenses = (query: string, conditions: LicenseConditions, scans = false): AttentionList => ({
  query: `/api/licenses?${query}`,
  count: (db, at, bound) => countLicenses(db, conditions, at, bound),
  ...(scans ? { scans: true as const } : {}),
});

const deliveries = (query: string, conditions: DeliveryConditions): AttentionList => ({
  query: `/api/notifications/deliveries?${query}`,
  count: (db, _at, bound) => countDeliveries(db, conditions, bound),
});

export const ATTENTION_LISTS = {
  licenses_expiring_7d: licenses('status=expiring&within=7d', { status: 'expiring', withinMs: 7 * DAY }),
  licenses_expiring_30d: licenses('status=expiring&within=30d', { status: 'expiring', withinMs: 30 * DAY }),
  licenses_expired_7d: licenses('status=expired&within=7d', { status: 'expired', withinMs: 7 * DAY }),
  // Active as /metrics' near-limit licenses are: a deactivated license's seats need no one.
  licenses_at_machine_limit: licenses('seats=full&active=true', { seats: 'full', active: true }, true),
  licenses_usage_high: licenses('usage=high&active=true', { usage: 'high', active: true }),
  // Given up after notifications.give_up_after.
  deliveries_failed: deliveries('status=failed', { status: 'failed' }),
  // Tried, failed, and waiting for their next attempt: a receiver that is down right now.
  deliveries_retrying: deliveries('retrying=true', { retrying: true }),
} as const satisfies Record<string, AttentionList>;

export type AttentionListName = keyof typeof ATTENTION_LISTS;

export type AttentionCounts = Readonly<Record<AttentionListName, ListCount>>;

/**
 * Every count above at `at`, one statement after the other (one connection, as
 * store-figures.ts reads), each exact up to `bound` (paging.ts COUNT_BOUND by default).
 */
export async function countAttentionLists(db: Queryable, at: Date, bound?: number): Promise<AttentionCounts> {
  return countSome(db, at, Object.keys(ATTENTION_LISTS) as AttentionListName[], bound) as Promise<AttentionCounts>;
}

/** The counts of `names` only. */
export async function countSome(db: Queryable, at: Date, names: readonly AttentionListName[], bound?: number): Promise<Partial<AttentionCounts>> {
  const counts: Partial<Record<AttentionListName, ListCount>> = {};
  for (const name of names) counts[name] = await (ATTENTION_LISTS[name] as AttentionList).count(db, at, bound);
  return counts;
}
