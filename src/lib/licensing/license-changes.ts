import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { licenseFields } from '../notifications/license-events.js';
import { raiseEvent } from '../notifications/outbox.js';
import type { Database, Queryable, SqlValue } from '../storage/types.js';
import { describe, truncateToSeconds } from '../validate.js';
import { getEntitlementByCode, parseEntitlementCode } from './entitlements.js';
import { parseDuration } from '../duration.js';
import { parseBinding, parseLeaseHours, parseMaxMachines, parseMetadata } from './license-terms.js';
import { dropEmpty, getLicense, toDate, type EntitlementGrant, type License } from './licenses.js';
import { listMachines } from './machines.js';

/**
 * Changing a license in place: same id, same key, so the customer re-enters nothing. The
 * next online validation and the next checkout see the change; files already checked out
 * keep the window they were signed with (a license shortened today still has valid
 * offline files until they end, and `machine list` shows those machines).
 */
export interface LicenseUpdate {
  readonly validFrom?: Date | string;
  readonly validUntil?: Date | string;
  /** null removes the limit. */
  readonly maxMachines?: number | null;
  /** Switch between floating seats (leases) and node-locked machines; needs a machine limit. */
  readonly floating?: boolean;
  readonly leaseHours?: number;
  readonly addEntitlements?: readonly EntitlementGrant[];
  readonly removeEntitlements?: readonly string[];
  readonly setLimits?: readonly EntitlementGrant[];
  /** Merged into the license's metadata; an empty value removes its key. */
  readonly metadata?: Readonly<Record<string, string>>;
  /**
   * 'hardware-id' or 'machine-key': how the next checkouts seal the decryption key. Files
   * already checked out keep the binding they were made with.
   */
  readonly binding?: string;
}

export interface LicenseChange {
  readonly license: License;
  /** Field by field, what was and what is now; empty when nothing changed. */
  readonly changes: Readonly<Record<string, { readonly before: unknown; readonly after: unknown }>>;
  /** Allowed, but the operator should know: machines over a lowered limit, usage over a limit. */
  readonly warnings: readonly string[];
}

/** One transaction: every change is applied, or none (a refusal leaves the license as it was). */
export async function updateLicense(db: Database, reference: string, update: LicenseUpdate, context: OperationContext): Promise<LicenseChange> {
  const parsed = parseUpdate(update);
  return db.transaction(async (tx) => {
    const at = now(context);
    const before = await getLicense(tx, reference, { seatsAt: at });
    const changes: Record<string, { before: unknown; after: unknown }> = {};
    const warnings: string[] = [];
    const sets: string[] = [];
    const params: SqlValue[] = [];
    const set = (column: string, beforeValue: unknown, afterValue: SqlValue, shown: unknown = afterValue) => {
      if (JSON.stringify(beforeValue) === JSON.stringify(shown)) return;
      sets.push(`${column} = ?`);
      params.push(afterValue);
      changes[column] = { before: beforeValue, after: shown };
    };

    const validFrom = parsed.validFrom ? truncateToSeconds(toDate(parsed.validFrom, 'valid_from', false)).toISOString() : before.valid_from;
    const validUntil = parsed.validUntil ? truncateToSeconds(toDate(parsed.validUntil, 'valid_until', true)).toISOString() : before.valid_until;
    if (parsed.validUntil && Date.parse(validUntil) <= at.getTime()) {
      throw new LicenseServerError('INVALID_VALIDITY', `valid_until ${validUntil} is in the past`, {
        hint: 'To stop a license now, deactivate it with `license-server license deactivate`.',
      });
    }
    if (Date.parse(validUntil) <= Date.parse(validFrom)) {
      throw new LicenseServerError('INVALID_VALIDITY', `valid_until ${validUntil} is not after valid_from ${validFrom}`);
    }
    set('valid_from', before.valid_from, validFrom);
    set('valid_until', before.valid_until, validUntil);

    const maxMachines = parsed.maxMachines === undefined ? before.max_machines : parsed.maxMachines;
    const floating = parsed.floating ?? before.floating;
    if (floating && maxMachines === null) {
      throw new LicenseServerError('INVALID_INPUT', 'a floating license needs a machine limit: its seats are what the machines share');
    }
    if (parsed.maxMachines !== undefined) set('max_machines', before.max_machines, parsed.maxMachines);
    if (parsed.floating !== undefined) set('floating', before.floating, parsed.floating);
    if (parsed.leaseHours !== undefined) set('lease_hours', before.lease_hours, parsed.leaseHours);
    if (parsed.binding !== undefined) set('binding', before.binding, parsed.binding);
    if (parsed.metadata !== undefined) {
      const merged = dropEmpty({ ...before.metadata, ...parsed.metadata });
      set('metadata', before.metadata, JSON.stringify(merged), merged);
    }

    await changeEntitlements(tx, before, parsed, changes, warnings);
    if (Object.keys(changes).length === 0) return { license: before, changes, warnings };
    await tx.execute(`UPDATE licenses SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE id = ?`, [...params, at.toISOString(), before.id]);
    // Seats are counted by the new terms (a switch to node-locked makes every active machine hold one).
    if (maxMachines !== null && (changes.max_machines || changes.floating)) {
      const holding = await listMachines(tx, { licenseId: before.id, holdingSeat: true, limit: 1000 }, at);
      if (holding.length > maxMachines) {
        warnings.push(
          `${holding.length} machines hold a seat, more than the ${changes.max_machines ? 'new ' : ''}limit of ${maxMachines}; none is dropped, and no new machine is admitted until fewer hold one:\n` +
            holding.map((machine) => `  ${machine.id}  ${machine.hardware_id}${machine.name ? ` (${machine.name})` : ''}`).join('\n'),
        );
      }
    }
    await recordAudit(tx, context, { action: 'license.updated', entityType: 'license', entityId: before.id, details: { changes } });
    const license = await getLicense(tx, before.id, { seatsAt: at });
    await raiseEvent(tx, 'license.updated', { ...licenseFields(license), changes, summary: summarizeChanges(changes), actor: context.actor }, context);
    return { license, changes, warnings };
  });
}

async function changeEntitlements(
  tx: Queryable,
  before: License,
  update: LicenseUpdate,
  changes: Record<string, { before: unknown; after: unknown }>,
  warnings: string[],
): Promise<void> {
  const granted = new Map(before.entitlements.map((entitlement) => [entitlement.code, entitlement]));
  const touched = new Set<string>();
  const once = (code: string) => {
    if (touched.has(code)) throw new LicenseServerError('INVALID_INPUT', `entitlement ${describe(code)} is changed twice in one update`);
    touched.add(code);
  };
  for (const code of update.removeEntitlements ?? []) {
    once(code);
    if (!granted.has(code)) throw new LicenseServerError('ENTITLEMENT_NOT_FOUND', `the license has no entitlement ${describe(code)} to remove`);
    const entitlement = await getEntitlementByCode(tx, code);
    await tx.execute('DELETE FROM license_entitlements WHERE license_id = ? AND entitlement_id = ?', [before.id, entitlement.id]);
    changes[`entitlement ${code}`] = { before: { usage_limit: granted.get(code)!.usage_limit }, after: null };
  }
  for (const grant of update.addEntitlements ?? []) {
    once(grant.code);
    if (granted.has(grant.code)) {
      throw new LicenseServerError('INVALID_INPUT', `the license already has entitlement ${describe(grant.code)}`, {
        hint: 'Change its limit with --set-limit CODE:LIMIT.',
      });
    }
    const entitlement = await getEntitlementByCode(tx, grant.code);
    await tx.execute('INSERT INTO license_entitlements (license_id, entitlement_id, usage_limit) VALUES (?, ?, ?)', [
      before.id, entitlement.id, grant.usageLimit,
    ]);
    changes[`entitlement ${grant.code}`] = { before: null, after: { usage_limit: grant.usageLimit } };
  }
  for (const grant of update.setLimits ?? []) {
    once(grant.code);
    const current = granted.get(grant.code);
    if (!current) {
      await getEntitlementByCode(tx, grant.code);
      throw new LicenseServerError('ENTITLEMENT_NOT_FOUND', `the license has no entitlement ${describe(grant.code)}`, {
        hint: 'Grant it with --add-entitlement CODE[:LIMIT].',
      });
    }
    if (current.usage_limit === grant.usageLimit) continue;
    const entitlement = await getEntitlementByCode(tx, grant.code);
    await tx.execute('UPDATE license_entitlements SET usage_limit = ? WHERE license_id = ? AND entitlement_id = ?', [
      grant.usageLimit, before.id, entitlement.id,
    ]);
    changes[`entitlement ${grant.code}`] = { before: { usage_limit: current.usage_limit }, after: { usage_limit: grant.usageLimit } };
    if (grant.usageLimit !== null && current.used > grant.usageLimit) {
      warnings.push(`${grant.code} has already used ${current.used}, more than its new limit of ${grant.usageLimit}: further usage is refused`);
    }
  }
}

function parseUpdate(update: LicenseUpdate): LicenseUpdate {
  for (const code of update.removeEntitlements ?? []) parseEntitlementCode(code);
  for (const grant of [...(update.addEntitlements ?? []), ...(update.setLimits ?? [])]) {
    parseEntitlementCode(grant.code);
    if (grant.usageLimit !== null && (!Number.isSafeInteger(grant.usageLimit) || grant.usageLimit < 0)) {
      throw new LicenseServerError('INVALID_INPUT', `usage limit of ${grant.code} must be a non-negative integer`);
    }
  }
  return {
    ...update,
    ...(update.maxMachines === undefined ? {} : { maxMachines: parseMaxMachines(update.maxMachines) }),
    ...(update.leaseHours === undefined ? {} : { leaseHours: parseLeaseHours(update.leaseHours) }),
    ...(update.metadata === undefined ? {} : { metadata: parseMetadata(update.metadata) }),
    ...(update.binding === undefined ? {} : { binding: parseBinding(update.binding) }),
  };
}

export type Renewal = { readonly by: string } | { readonly until: Date | string };

/**
 * Extends a subscription: `by` adds a span to the license's end, or to now when it has
 * already ended (a lapsed subscription renewed today runs the full span from today);
 * `until` sets a new end, which must be later than the current one (to shorten, use
 * update). A deactivated license, or one of a deactivated customer, is refused: someone
 * stopped it on purpose, and a renewal must not quietly undo that.
 */
export async function renewLicense(db: Database, reference: string, renewal: Renewal, context: OperationContext): Promise<LicenseChange> {
  const span = 'by' in renewal ? parseDuration(renewal.by, '--by') : undefined;
  return db.transaction(async (tx) => {
    const at = now(context);
    const before = await getLicense(tx, reference, { seatsAt: at });
    if (!before.active) {
      throw new LicenseServerError('LICENSE_INACTIVE', `license ${before.id} is deactivated; activate it before renewing it`);
    }
    if (!before.customer_active) {
      throw new LicenseServerError('CUSTOMER_INACTIVE', `customer ${before.customer_id} of license ${before.id} is deactivated; activate the customer before renewing`);
    }
    const end = Date.parse(before.valid_until);
    const next = span !== undefined
      ? new Date(Math.max(end, truncateToSeconds(at).getTime()) + span)
      : truncateToSeconds(toDate((renewal as { until: Date | string }).until, 'valid_until', true));
    if (next.getTime() <= end) {
      throw new LicenseServerError('INVALID_VALIDITY', `a renewal must end after the license's current end ${before.valid_until}, got ${next.toISOString()}`, {
        hint: 'To shorten a license, use `license-server license update --valid-until`.',
      });
    }
    if (next.getTime() <= at.getTime()) {
      throw new LicenseServerError('INVALID_VALIDITY', `valid_until ${next.toISOString()} is in the past`);
    }
    const changes = { valid_until: { before: before.valid_until, after: next.toISOString() } };
    await tx.execute('UPDATE licenses SET valid_until = ?, updated_at = ? WHERE id = ?', [next.toISOString(), at.toISOString(), before.id]);
    await recordAudit(tx, context, {
      action: 'license.renewed',
      entityType: 'license',
      entityId: before.id,
      details: { changes, ...(span !== undefined ? { by: (renewal as { by: string }).by } : {}) },
    });
    const license = await getLicense(tx, before.id, { seatsAt: at });
    await raiseEvent(tx, 'license.renewed', { ...licenseFields(license), previous_valid_until: before.valid_until, actor: context.actor }, context);
    return { license, changes, warnings: [] };
  });
}

/** The changes in one line for an email (`max_machines: 3 -> 5; valid_until: ... -> ...`); webhooks get them whole. */
function summarizeChanges(changes: Readonly<Record<string, { readonly before: unknown; readonly after: unknown }>>): string {
  const shown = (value: unknown) => (value === null ? 'none' : typeof value === 'object' ? JSON.stringify(value) : String(value));
  return Object.entries(changes).map(([field, { before, after }]) => `${field}: ${shown(before)} -> ${shown(after)}`).join('; ');
}
