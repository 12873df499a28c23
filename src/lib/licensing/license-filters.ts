import type { ListFilters } from '../cursor.js';
import { LicenseServerError } from '../errors.js';
import { unindexedBoolean, unindexedText } from '../paging.js';
import type { SqlValue } from '../storage/types.js';
import { describe, parseUuid } from '../validate.js';
import { parseEntitlementCode } from './entitlements.js';
import { LICENSE_STATUSES, statusCondition, type LicenseStatus } from './license-status.js';
import { seatHeld } from './machines.js';

/**
 * What a list of licenses (GET /api/licenses, its count, the attention counts, and anything
 * that acts on every license of a filter) can be narrowed to. Every member is optional and
 * they combine with AND. Time ranges are half-open: `...After` includes its instant,
 * `...Before` excludes it, as the audit log's since/until.
 */
export interface LicenseConditions {
  readonly customerId?: string;
  readonly active?: boolean;
  readonly type?: string;
  readonly status?: LicenseStatus;
  /** With `expiring`: ends within this span (default 7 days); with `expired`: ended within it. */
  readonly withinMs?: number;
  /** Machines holding a seat (machines.ts seatHeld) at or over max_machines. */
  readonly seats?: 'full';
  /** Some entitlement's use at or over USAGE_HIGH of its limit. */
  readonly usage?: 'high';
  /** Holds the entitlement of this code. */
  readonly entitlement?: string;
  readonly createdAfter?: Date;
  readonly createdBefore?: Date;
  /** On valid_until. */
  readonly expiresAfter?: Date;
  readonly expiresBefore?: Date;
  /**
   * On the license's last validation: the newest `last_seen` of its machines (written by an
   * online validation or a checkout, at most once a minute per machine). A license none of
   * whose machines was seen since `validatedBefore` matches it, also one never validated.
   */
  readonly validatedAfter?: Date;
  readonly validatedBefore?: Date;
}

export const LICENSE_TYPE_VALUES = ['time_based', 'usage_based', 'hybrid'] as const;

/** "High" usage: used at 80 % of the limit or more; used * 5.0 >= limit * 4.0, outside bigint arithmetic (a used count near the bigint maximum would overflow it). */
export const USAGE_HIGH = 0.8;

/**
 * The condition of usage=high on `license_entitlements le`, over migration 16's index on the
 * same expression (NULL, so never true, for a grant without a limit).
 */
export const USAGE_HIGH_SQL = 'le.used * 5.0 - le.usage_limit * 4.0 >= 0';

export interface LicenseWhere {
  readonly where: string[];
  readonly params: SqlValue[];
  /** What a cursor is bound to (cursor.ts): every filter given, as text or numbers. */
  readonly filters: ListFilters;
}

/**
 * The WHERE conditions of `conditions` over `licenses l`,
 * evaluated at `at` (status, seats). One function for every list, count and job, so that they
 * all select exactly the same rows.
 */
export function licenseWhere(conditions: LicenseConditions, at: Date): LicenseWhere {
  const where: string[] = [];
  const params: SqlValue[] = [];
  const add = (sql: string, ...values: SqlValue[]) => {
    where.push(sql);
    params.push(...values);
  };
  const customerId = conditions.customerId === undefined ? undefined : parseUuid(conditions.customerId, 'customer id');
  const type = conditions.type === undefined ? undefined : checkType(conditions.type);
  const status = conditions.status === undefined ? undefined : checkStatus(conditions.status);
  const entitlement = conditions.entitlement === undefined ? undefined : parseEntitlementCode(conditions.entitlement);
  if (conditions.withinMs !== undefined && status !== 'expiring' && status !== 'expired') {
    throw new LicenseServerError('INVALID_INPUT', 'within goes with status=expiring (ends within) or status=expired (ended within)');
  }
  // A customer has a handful of licenses: read them by its index, the rest checked per row.
  // Elsewhere a status, a date range or high usage is the selective part, read from its own
  // index: `active` and `type`, true of most licenses, must not take SQLite
  // (which has no statistics) to their own indexes then.
  const byCustomer = customerId !== undefined;
  const ranged = status !== undefined || conditions.expiresAfter !== undefined || conditions.expiresBefore !== undefined
    || conditions.createdAfter !== undefined || conditions.createdBefore !== undefined || conditions.usage !== undefined;
  const plain = !byCustomer && !ranged;
  if (customerId !== undefined) add('l.customer_id = ?', customerId);
  if (conditions.active !== undefined) add(`${plain ? 'l.active' : unindexedBoolean('l.active')} = ?`, conditions.active);
  if (type !== undefined) add(`${plain && conditions.active === undefined ? 'l.type' : unindexedText('l.type')} = ?`, type);
  if (status !== undefined) {
    const condition = statusCondition(status, at, conditions.withinMs);
    add(condition.sql, ...condition.params);
  }
  const stamp = (date: Date | undefined) => date?.toISOString();
  const created = [stamp(conditions.createdAfter), stamp(conditions.createdBefore)] as const;
  const expires = [stamp(conditions.expiresAfter), stamp(conditions.expiresBefore)] as const;
  const validated = [stamp(conditions.validatedAfter), stamp(conditions.validatedBefore)] as const;
  if (created[0] !== undefined) add('l.created_at >= ?', created[0]);
  if (created[1] !== undefined) add('l.created_at < ?', created[1]);
  if (expires[0] !== undefined) add('l.valid_until >= ?', expires[0]);
  if (expires[1] !== undefined) add('l.valid_until < ?', expires[1]);
  if (validated[0] !== undefined) add('EXISTS (SELECT 1 FROM machines m WHERE m.license_id = l.id AND m.last_seen >= ?)', validated[0]);
  if (validated[1] !== undefined) add('NOT EXISTS (SELECT 1 FROM machines m WHERE m.license_id = l.id AND m.last_seen >= ?)', validated[1]);
  if (entitlement !== undefined) {
    add('EXISTS (SELECT 1 FROM license_entitlements le JOIN entitlements e ON e.id = le.entitlement_id WHERE le.license_id = l.id AND e.code = ?)', entitlement);
  }
  if (conditions.usage !== undefined) {
    if (conditions.usage !== 'high') throw new LicenseServerError('INVALID_INPUT', `usage must be high, got ${describe(String(conditions.usage))}`);
    // IN, not EXISTS: the few licenses migration 16's index finds near their limit are looked up,
    // instead of every license probed for its grants.
    add(`l.id IN (SELECT le.license_id FROM license_entitlements le WHERE ${USAGE_HIGH_SQL})`);
  }
  if (conditions.seats !== undefined) {
    if (conditions.seats !== 'full') throw new LicenseServerError('INVALID_INPUT', `seats must be full, got ${describe(String(conditions.seats))}`);
    const full = seatsFull(at);
    add(full.sql, ...full.params);
  }
  const filters: ListFilters = {
    customer_id: customerId,
    active: conditions.active,
    type,
    status,
    within_ms: conditions.withinMs,
    seats: conditions.seats,
    usage: conditions.usage,
    entitlement,
    created_after: created[0],
    created_before: created[1],
    expires_after: expires[0],
    expires_before: expires[1],
    validated_after: validated[0],
    validated_before: validated[1],
  };
  return { where, params, filters };
}

/**
 * Licenses with a machine limit whose machines holding a seat at `at` are at least the limit,
 * over `licenses l`. The machines of the license are counted by the index on license_id
 * first, and the seats only where there are enough machines at all: most licenses have
 * fewer machines than seats (store-figures.ts counts near-limit licenses the same way).
 */
export function seatsFull(at: Date): { readonly sql: string; readonly params: SqlValue[] } {
  const held = seatHeld(at);
  return {
    sql: `(l.max_machines IS NOT NULL
      AND (SELECT count(*) FROM machines m WHERE m.license_id = l.id) >= l.max_machines
      AND (SELECT count(*) FROM machines m WHERE m.license_id = l.id AND ${held.sql}) >= l.max_machines)`,
    params: held.params,
  };
}

function checkType(type: string): string {
  if (!(LICENSE_TYPE_VALUES as readonly string[]).includes(type)) {
    throw new LicenseServerError('INVALID_LICENSE_TYPE', `invalid license type ${describe(type)}`);
  }
  return type;
}

function checkStatus(status: string): LicenseStatus {
  if (!(LICENSE_STATUSES as readonly string[]).includes(status)) {
    throw new LicenseServerError('INVALID_INPUT', `status must be one of ${LICENSE_STATUSES.join(', ')}, got ${describe(status)}`);
  }
  return status as LicenseStatus;
}
