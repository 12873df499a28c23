import { unindexedBoolean, unindexedTime } from '../paging.js';
import type { SqlValue } from '../storage/types.js';

/**
 * A license's status, computed on the server at the request's time so that every screen,
 * filter and count agrees (issue 36). Ranked as Keygen ranks its own (keygen-api
 * app/models/license.rb): the first that holds wins.
 * - `suspended`: the license or its customer is deactivated (validation refuses it);
 * - `expired`: valid_until <= now;
 * - `pending`: valid_from > now (not valid yet);
 * - `expiring`: valid_until <= now + EXPIRING_WITHIN_MS;
 * - `active`: anything else.
 */
export const LICENSE_STATUSES = ['active', 'expiring', 'expired', 'suspended', 'pending'] as const;
export type LicenseStatus = (typeof LICENSE_STATUSES)[number];

/** Later than any valid_from (validate.ts refuses the year 10000). */
const LAST_TIMESTAMP = '9999-12-31T23:59:59.999Z';

/** A license whose end is this close (or closer) is `expiring` rather than `active`. */
export const EXPIRING_WITHIN_MS = 7 * 86_400_000;

export interface StatusInputs {
  readonly active: boolean;
  readonly customer_active: boolean;
  readonly valid_from: string;
  readonly valid_until: string;
}

export function licenseStatus(license: StatusInputs, at: Date): LicenseStatus {
  const now = at.getTime();
  const until = Date.parse(license.valid_until);
  if (!license.active || !license.customer_active) return 'suspended';
  if (until <= now) return 'expired';
  if (Date.parse(license.valid_from) > now) return 'pending';
  if (until <= now + EXPIRING_WITHIN_MS) return 'expiring';
  return 'active';
}

/** A column of the customer of `licenses l`, as a subquery by its primary key (no join needed). */
export const CUSTOMER_OF_LICENSE = (column: 'name' | 'active') => `(SELECT c.${column} FROM customers c WHERE c.id = l.customer_id)`;

export interface StatusCondition {
  readonly sql: string;
  readonly params: SqlValue[];
}

/**
 * The rule above as SQL over `licenses l` (the customer looked up by CUSTOMER_OF_LICENSE). `windowMs` widens or narrows what
 * counts as expiring (`within` of the list filter); for `expired` a window keeps only the
 * licenses that ended within it (`status=expired&within=7d`: ended in the last 7 days).
 * Timestamps compare as ISO text on SQLite and timestamptz on PostgreSQL, both in time order.
 *
 * A window picks out few licenses: they are read from the valid_until index. Without one,
 * `active` and `expired` hold for a large share of the licenses, which are better read in
 * the list's own order from its index and checked per row; SQLite, which has no statistics,
 * is kept off the valid_until index there by comparing through an expression.
 */
export function statusCondition(status: LicenseStatus, at: Date, windowMs?: number): StatusCondition {
  const now = at.toISOString();
  if (status === 'suspended') return { sql: `(l.active = ? OR ${CUSTOMER_OF_LICENSE('active')} = ?)`, params: [false, false] };
  const live = `${unindexedBoolean('l.active')} = ? AND ${CUSTOMER_OF_LICENSE('active')} = ?`;
  const liveParams: SqlValue[] = [true, true];
  switch (status) {
    case 'expired':
      return windowMs === undefined
        ? { sql: `(${live} AND ${unindexedTime('l.valid_until')} <= ?)`, params: [...liveParams, now] }
        : { sql: `(${live} AND l.valid_until <= ? AND l.valid_until > ?)`, params: [...liveParams, now, new Date(at.getTime() - windowMs).toISOString()] };
    case 'pending':
      // Few licenses start in the future: read from the valid_from index (migration 16).
      // Bounded on both sides, which SQLite without statistics takes for a narrow range.
      return { sql: `(${live} AND ${unindexedTime('l.valid_until')} > ? AND l.valid_from > ? AND l.valid_from <= ?)`, params: [...liveParams, now, now, LAST_TIMESTAMP] };
    case 'expiring':
      return {
        sql: `(${live} AND l.valid_until > ? AND l.valid_until <= ? AND l.valid_from <= ?)`,
        params: [...liveParams, now, new Date(at.getTime() + (windowMs ?? EXPIRING_WITHIN_MS)).toISOString(), now],
      };
    case 'active':
      return {
        sql: `(${live} AND ${unindexedTime('l.valid_until')} > ? AND l.valid_from <= ?)`,
        params: [...liveParams, new Date(at.getTime() + EXPIRING_WITHIN_MS).toISOString(), now],
      };
  }
}
