import { listAudit } from '../audit.js';
import { getCustomer, type Customer } from '../customers.js';
import type { Keyset } from '../cursor.js';
import { pageQuery, fetchPage, type ListPage, type Page, type PageQuery } from '../paging.js';
import type { Queryable, SqlValue } from '../storage/types.js';
import { asInt, asIntOrNull, asIso } from '../storage/values.js';
import { getLicense, listLicensesPage, type License } from './licenses.js';

/** What operators look at: a license with its consumption, and a customer's licenses summed. */

export interface CheckoutRecord {
  readonly checked_out_at: string;
  readonly actor: string;
  readonly hardware_id: string | null;
  readonly valid_until: string;
  /** Its file was never written (`license.checkout_voided`): it holds no seat. */
  readonly voided: boolean;
}

export interface LicenseView extends License {
  readonly machines_in_use: number;
  /** Newest first, at most five, from the audit log. */
  readonly recent_checkouts: readonly CheckoutRecord[];
}

export async function getLicenseView(db: Queryable, reference: string, at: Date): Promise<LicenseView> {
  const license = await getLicense(db, reference, { seatsAt: at });
  const entries = await listAudit(db, { action: 'license.checked_out', entityType: 'license', entityId: license.id, limit: 5 });
  // A void is recorded after its checkout: none of these is older than the oldest checkout.
  const oldest = entries.at(-1);
  const voids = oldest === undefined
    ? []
    : await listAudit(db, { action: 'license.checkout_voided', entityType: 'license', entityId: license.id, since: new Date(oldest.occurred_at), limit: 1000 });
  const voided = new Set(voids.map((entry) => entry.details.checkout_id));
  return {
    ...license,
    machines_in_use: license.machines_in_use ?? 0,
    recent_checkouts: entries.map((entry) => ({
      checked_out_at: entry.occurred_at,
      actor: entry.actor,
      hardware_id: typeof entry.details.hardware_id === 'string' ? entry.details.hardware_id : null,
      // Older entries hold the file's whole-second form; shown in the one form all times take.
      valid_until: asIso(String(entry.details.valid_until)),
      voided: entry.details.checkout_id !== undefined && voided.has(entry.details.checkout_id),
    })),
  };
}

export interface UsageRecord {
  readonly id: string;
  readonly entitlement_code: string;
  readonly quantity: number;
  readonly remaining: number | null;
  readonly hardware_id: string;
  readonly idempotency_key: string;
  readonly occurred_at: string;
  readonly recorded_at: string;
}

export const USAGE_KEYSET: Keyset = {
  list: 'usage',
  keys: [{ column: 'u.recorded_at', field: 'recorded_at', kind: 'timestamp' }, { column: 'u.id', field: 'id', kind: 'uuid' }],
  descending: true,
};

export interface UsageFilter extends Page {
  readonly since?: Date;
}

/** One page of a license's usage reports (by its id), newest first by when the server recorded them. */
export function usageListQuery(licenseId: string, filter: UsageFilter = {}): PageQuery {
  const where = ['u.license_id = ?'];
  const params: SqlValue[] = [licenseId];
  const since = filter.since?.toISOString();
  if (since !== undefined) {
    where.push('u.recorded_at >= ?');
    params.push(since);
  }
  return pageQuery(
    `SELECT u.id, e.code, u.quantity, u.remaining, u.hardware_id, u.idempotency_key, u.occurred_at, u.recorded_at
     FROM usage_records u JOIN entitlements e ON e.id = u.entitlement_id`,
    where, params, USAGE_KEYSET, { license_id: licenseId, since }, filter,
  );
}

export async function listUsageRecordsPage(db: Queryable, reference: string, filter: UsageFilter = {}): Promise<ListPage<UsageRecord>> {
  const license = await getLicense(db, reference, { seats: false });
  return fetchPage(db, usageListQuery(license.id, filter), (row) => ({
    id: String(row.id),
    entitlement_code: String(row.code),
    quantity: asInt(row.quantity),
    remaining: asIntOrNull(row.remaining),
    hardware_id: String(row.hardware_id),
    idempotency_key: String(row.idempotency_key),
    occurred_at: asIso(row.occurred_at),
    recorded_at: asIso(row.recorded_at),
  }));
}

/** Usage reports of a license, newest first (by when the server recorded them). */
export async function listUsageRecords(db: Queryable, reference: string, filter: UsageFilter = {}): Promise<UsageRecord[]> {
  return (await listUsageRecordsPage(db, reference, filter)).items;
}

export interface CustomerSummary extends Customer {
  readonly licenses: number;
  readonly active_licenses: number;
  readonly machines_in_use: number;
  /** Per entitlement code over all the customer's licenses; limit null when any is unlimited. */
  readonly entitlements: ReadonlyArray<{ readonly code: string; readonly used: number; readonly usage_limit: number | null }>;
}

const PAGE = 500;

export async function getCustomerSummary(db: Queryable, id: string, at: Date): Promise<CustomerSummary> {
  const customer = await getCustomer(db, id);
  const licenses: License[] = [];
  // By cursor: an offset stops at MAX_LIST_OFFSET, and costs more the further it goes.
  for (let cursor: string | undefined; ;) {
    const page = await listLicensesPage(db, { customerId: customer.id, limit: PAGE, ...(cursor === undefined ? {} : { cursor }) }, at);
    licenses.push(...page.items);
    if (page.next_cursor === null) break;
    cursor = page.next_cursor;
  }
  const byCode = new Map<string, { code: string; used: number; usage_limit: number | null }>();
  for (const license of licenses) {
    for (const entitlement of license.entitlements) {
      const sum = byCode.get(entitlement.code) ?? { code: entitlement.code, used: 0, usage_limit: 0 };
      sum.used += entitlement.used;
      sum.usage_limit = sum.usage_limit === null || entitlement.usage_limit === null ? null : sum.usage_limit + entitlement.usage_limit;
      byCode.set(entitlement.code, sum);
    }
  }
  return {
    ...customer,
    licenses: licenses.length,
    active_licenses: licenses.filter((license) => license.active).length,
    machines_in_use: licenses.reduce((sum, license) => sum + (license.machines_in_use ?? 0), 0),
    entitlements: [...byCode.values()].sort((a, b) => (a.code < b.code ? -1 : a.code > b.code ? 1 : 0)),
  };
}
