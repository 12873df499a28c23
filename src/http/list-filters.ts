import type { AuditFilter } from '../lib/audit.js';
import { parseDuration } from '../lib/duration.js';
import { LicenseServerError } from '../lib/errors.js';
import type { LicenseConditions } from '../lib/licensing/license-filters.js';
import type { LicenseStatus } from '../lib/licensing/license-status.js';
import type { MachineConditions } from '../lib/licensing/machines.js';
import { describe, parseTimestamp } from '../lib/validate.js';
import { queryBoolean } from './fields.js';

/**
 * The filters of the list routes as query parameters, parsed once here for every route that
 * selects rows by them: a list, its count, and any later action over a filter. The query
 * names are the API's (docs/http-api.md, "Filters"); values are checked here for their form
 * and by the core for their meaning, and anything else is 400 INVALID_INPUT (a date that is
 * not one, INVALID_DATE).
 */
type Query = Readonly<Record<string, string | undefined>>;

export const LICENSE_FILTER_QUERY = [
  'customer_id', 'active', 'type', 'status', 'within', 'seats', 'usage', 'entitlement',
  'created_after', 'created_before', 'expires_after', 'expires_before', 'validated_after', 'validated_before',
] as const;

export const MACHINE_FILTER_QUERY = ['license_id', 'holding_seat', 'active', 'hardware_id', 'last_seen_after', 'last_seen_before'] as const;

export const AUDIT_FILTER_QUERY = ['action', 'actor', 'entity_type', 'entity_id', 'since', 'until'] as const;

/** Omitted members stay absent, so that a filter object compares and fingerprints by what was given. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, member]) => member !== undefined)) as T;
}

export function parseLicenseFilters(q: Query): LicenseConditions {
  const status = q.status as LicenseStatus | undefined;
  // A default window for expiring is the core's (EXPIRING_WITHIN_MS); `within` alone is refused there.
  const withinMs = q.within === undefined ? undefined : parseDuration(q.within, 'within');
  return defined({
    customerId: q.customer_id,
    active: queryBoolean(q.active, 'active'),
    type: q.type,
    status,
    withinMs,
    seats: oneOf(q.seats, 'seats', ['full'] as const),
    usage: oneOf(q.usage, 'usage', ['high'] as const),
    entitlement: q.entitlement,
    createdAfter: time(q.created_after, 'created_after'),
    createdBefore: time(q.created_before, 'created_before'),
    expiresAfter: time(q.expires_after, 'expires_after'),
    expiresBefore: time(q.expires_before, 'expires_before'),
    validatedAfter: time(q.validated_after, 'validated_after'),
    validatedBefore: time(q.validated_before, 'validated_before'),
  });
}

export function parseMachineFilters(q: Query): MachineConditions {
  return defined({
    licenseId: q.license_id,
    holdingSeat: queryBoolean(q.holding_seat, 'holding_seat'),
    active: queryBoolean(q.active, 'active'),
    hardwareId: q.hardware_id,
    lastSeenAfter: time(q.last_seen_after, 'last_seen_after'),
    lastSeenBefore: time(q.last_seen_before, 'last_seen_before'),
  });
}

export function parseAuditFilters(q: Query): Omit<AuditFilter, 'limit' | 'offset' | 'cursor'> {
  return defined({
    action: q.action,
    actor: q.actor,
    entityType: q.entity_type,
    entityId: q.entity_id,
    since: time(q.since, 'since'),
    until: time(q.until, 'until'),
  });
}

function time(value: string | undefined, name: string): Date | undefined {
  return value === undefined ? undefined : parseTimestamp(value, name);
}

function oneOf<T extends string>(value: string | undefined, name: string, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) {
    throw new LicenseServerError('INVALID_INPUT', `query parameter "${name}" must be ${allowed.join(' or ')}, got ${describe(value)}`);
  }
  return value as T;
}
