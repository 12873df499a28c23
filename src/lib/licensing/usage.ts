import { randomUUID } from 'node:crypto';
import { now, type OperationContext } from '../context.js';
import { parseEntitlementCode } from './entitlements.js';
import { LicenseServerError } from '../errors.js';
import { parseHardwareId } from '../offline/binding.js';
import { checkReportingMachine } from './machines.js';
import { licenseFields } from '../notifications/license-events.js';
import { raiseUsageThresholds } from '../notifications/usage-thresholds.js';
import { checkUsable, findLicenseByKey } from './online-validation.js';
import { isUniqueViolation } from '../storage/errors.js';
import type { Database, Queryable } from '../storage/types.js';
import { asInt, asIntOrNull } from '../storage/values.js';
import { describe, parseTimestamp } from '../validate.js';

export interface UsageReport {
  readonly license_key: unknown;
  readonly hardware_id: unknown;
  readonly entitlement_code: unknown;
  readonly quantity: unknown;
  readonly occurred_at: unknown;
  readonly idempotency_key: unknown;
}

export interface UsageAnswer {
  /** True when this report had been counted before under the same idempotency key. */
  readonly replayed: boolean;
  readonly entitlement_code: string;
  readonly quantity: number;
  readonly used: number;
  readonly usage_limit: number | null;
  /** What is left after this report (null: no limit). */
  readonly remaining: number | null;
}

const MAX_QUANTITY = 1_000_000_000;
/** A client's clock may run ahead a little; a report from further in the future is refused. */
const FUTURE_TOLERANCE_MS = 5 * 60_000;

/**
 * Counts a usage report against the entitlement's limit, exactly once per idempotency key
 * (the client's offline queue replays what it is not sure was received), and only from a
 * machine allowed to report (checkReportingMachine). The limit check
 * and the increment are one conditional UPDATE, so concurrent reports on several
 * processes can never exceed it.
 */
export async function recordUsage(db: Database, report: UsageReport, context: Pick<OperationContext, 'clock'>): Promise<UsageAnswer> {
  const input = parseReport(report, now(context));
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await db.transaction((tx) => countOnce(tx, input, now(context)));
    } catch (error) {
      // Two reports with one key raced; the loser finds the winner's record next time.
      if (isUniqueViolation(error) && attempt < 3) continue;
      throw error;
    }
  }
}

interface ParsedReport {
  readonly licenseKey: string;
  readonly hardwareId: string;
  readonly code: string;
  readonly quantity: number;
  readonly occurredAt: Date;
  readonly idempotencyKey: string;
}

async function countOnce(tx: Queryable, input: ParsedReport, at: Date): Promise<UsageAnswer> {
  const license = await findLicenseByKey(tx, input.licenseKey);
  if (!license) throw new LicenseServerError('LICENSE_NOT_FOUND', 'no license has this key');
  const refusal = checkUsable(license, at);
  if (refusal) throw new LicenseServerError(refusal.reason, refusal.message);
  const grant = (await tx.query(
    `SELECT le.entitlement_id, le.usage_limit, le.used FROM license_entitlements le
     JOIN entitlements e ON e.id = le.entitlement_id WHERE le.license_id = ? AND e.code = ?`,
    [license.id, input.code],
  ))[0];
  if (!grant) throw new LicenseServerError('ENTITLEMENT_NOT_FOUND', `the license has no entitlement ${describe(input.code)}`);
  const entitlementId = String(grant.entitlement_id);

  const previous = (await tx.query(
    'SELECT entitlement_id, quantity, hardware_id, remaining FROM usage_records WHERE license_id = ? AND idempotency_key = ?',
    [license.id, input.idempotencyKey],
  ))[0];
  if (previous) {
    if (String(previous.entitlement_id) !== entitlementId || asInt(previous.quantity) !== input.quantity || previous.hardware_id !== input.hardwareId) {
      throw new LicenseServerError('IDEMPOTENCY_KEY_REUSED', `idempotency key ${describe(input.idempotencyKey)} was used for a different report`);
    }
    return answer(true, input, asInt(grant.used), asIntOrNull(grant.usage_limit));
  }
  // After the replay: a report counted once is answered again, whatever the machine holds now.
  await checkReportingMachine(tx, license, input.hardwareId, at);

  const changed = await tx.execute(
    `UPDATE license_entitlements SET used = used + ?
     WHERE license_id = ? AND entitlement_id = ? AND (usage_limit IS NULL OR used + ? <= usage_limit)`,
    [input.quantity, license.id, entitlementId, input.quantity],
  );
  const current = (await tx.query('SELECT usage_limit, used FROM license_entitlements WHERE license_id = ? AND entitlement_id = ?', [
    license.id,
    entitlementId,
  ]))[0]!;
  const limit = asIntOrNull(current.usage_limit);
  const used = asInt(current.used);
  if (changed === 0) {
    throw new LicenseServerError(
      'USAGE_LIMIT_EXCEEDED',
      `${input.quantity} more of ${input.code} would exceed its limit of ${limit} (${used} used)`,
    );
  }
  const result = answer(false, input, used, limit);
  await tx.execute(
    `INSERT INTO usage_records (id, license_id, entitlement_id, idempotency_key, hardware_id, quantity, remaining, occurred_at, recorded_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [randomUUID(), license.id, entitlementId, input.idempotencyKey, input.hardwareId, input.quantity, result.remaining,
      input.occurredAt.toISOString(), at.toISOString()],
  );
  if (limit !== null) {
    await raiseUsageThresholds(tx, { license: licenseFields(license), entitlementId, code: input.code, usageLimit: limit, used }, { clock: () => at });
  }
  return result;
}

function answer(replayed: boolean, input: ParsedReport, used: number, limit: number | null): UsageAnswer {
  return {
    replayed,
    entitlement_code: input.code,
    quantity: input.quantity,
    used,
    usage_limit: limit,
    remaining: limit === null ? null : Math.max(0, limit - used),
  };
}

function parseReport(report: UsageReport, at: Date): ParsedReport {
  if (typeof report.license_key !== 'string') throw new LicenseServerError('INVALID_INPUT', 'license_key must be a string');
  const hardwareId = parseHardwareId(report.hardware_id);
  if (typeof report.entitlement_code !== 'string') throw new LicenseServerError('INVALID_INPUT', 'entitlement_code must be a string');
  const code = parseEntitlementCode(report.entitlement_code);
  const quantity = report.quantity;
  if (typeof quantity !== 'number' || !Number.isSafeInteger(quantity) || quantity < 1 || quantity > MAX_QUANTITY) {
    throw new LicenseServerError('INVALID_INPUT', `quantity must be an integer from 1 to ${MAX_QUANTITY}`);
  }
  if (typeof report.occurred_at !== 'string') throw new LicenseServerError('INVALID_INPUT', 'occurred_at must be an RFC 3339 timestamp');
  const occurredAt = parseTimestamp(report.occurred_at, 'occurred_at');
  if (occurredAt.getTime() > at.getTime() + FUTURE_TOLERANCE_MS) {
    throw new LicenseServerError('INVALID_INPUT', `occurred_at ${occurredAt.toISOString()} is in the future`);
  }
  const key = report.idempotency_key;
  if (typeof key !== 'string' || !/^[\x21-\x7e]{1,128}$/.test(key)) {
    throw new LicenseServerError('INVALID_INPUT', 'idempotency_key must be 1-128 printable ASCII characters');
  }
  return { licenseKey: report.license_key, hardwareId, code, quantity, occurredAt, idempotencyKey: key };
}
