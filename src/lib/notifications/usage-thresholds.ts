import { now, type OperationContext } from '../context.js';
import type { Queryable } from '../storage/types.js';
import { raiseEvent } from './outbox.js';
import type { LicenseEventFields } from './license-events.js';

/** The shares of a usage limit that raise `usage.threshold`, once each per license and entitlement. */
export const USAGE_THRESHOLDS = [80, 100] as const;

export interface UsageLevel {
  readonly license: LicenseEventFields;
  readonly entitlementId: string;
  readonly code: string;
  readonly usageLimit: number;
  readonly used: number;
}

/**
 * Raises `usage.threshold` for the highest threshold a usage report reached, in the report's
 * transaction. Each threshold is a mark `usage.threshold:<license>:<entitlement id>:<percent>`
 * inserted ON CONFLICT DO NOTHING: only the transaction whose insert wins raises, so two
 * reports crossing a threshold at once on two daemons raise it once. A report that jumps
 * past several thresholds raises only the highest, and marks the lower ones as done: 80%
 * reached after 100% would be news of nothing.
 *
 * The marks do not depend on the limit: a limit raised after 100% was reached raises no
 * threshold again for that license and entitlement.
 */
export async function raiseUsageThresholds(tx: Queryable, level: UsageLevel, context: Pick<OperationContext, 'clock'>): Promise<number | undefined> {
  if (level.usageLimit <= 0) return undefined;
  // Integers: 80% of a limit of 5 is 4, reached by used * 100 >= 80 * 5, with no rounding.
  const reached = USAGE_THRESHOLDS.filter((percent) => level.used * 100 >= percent * level.usageLimit);
  const highest = reached[reached.length - 1];
  let raised: number | undefined;
  for (const percent of reached) {
    const key = `usage.threshold:${level.license.license_id}:${level.entitlementId}:${percent}`;
    const won = await tx.query('INSERT INTO notification_marks (key, at, count) VALUES (?, ?, 1) ON CONFLICT (key) DO NOTHING RETURNING key', [
      key,
      now(context).toISOString(),
    ]);
    if (won.length === 0 || percent !== highest) continue;
    await raiseEvent(tx, 'usage.threshold', {
      ...level.license,
      entitlement: level.code,
      usage_limit: level.usageLimit,
      used: level.used,
      percent,
    }, context);
    raised = percent;
  }
  return raised;
}
