import { now, type OperationContext } from '../context.js';
import type { Database } from '../storage/types.js';
import { asInt, asIso } from '../storage/values.js';
import { raiseLicenseEvent } from './license-events.js';
import { hasEnabledRuleFor } from './events.js';

/** At most one machine.limit_exceeded event per license in this time. */
export const LIMIT_EXCEEDED_INTERVAL_MS = 3_600_000;

export interface MachineRefusal {
  readonly licenseId: string;
  readonly hardwareId: string;
  readonly maxMachines: number;
}

/**
 * Counts a new machine refused for the license's machine limit, and raises
 * `machine.limit_exceeded` (when an enabled rule selects it) for the first refusal, then for the first one at least an hour
 * after the previous event, with `refused_count` the refusals since that event (this one
 * included). The mark `machine.limit_exceeded:<license>` holds the time of the last event
 * (`at`) and the refusals counted since without one (`count`).
 *
 * Its own transaction, after the refusal's: a checkout's refusal rolls back everything it
 * did. Concurrent refusals on PostgreSQL: one insert wins and the losers wait on it and then
 * update; the update takes the mark's row lock until commit, so the decision made on the
 * values it returns cannot be overtaken by another refusal.
 */
export async function countMachineRefusal(db: Database, refusal: MachineRefusal, context: Pick<OperationContext, 'clock'>): Promise<{ raised: boolean }> {
  // Refusals repeat as fast as clients retry: with no rule that wants them, one small read, no write.
  if (!(await hasEnabledRuleFor(db, 'machine.limit_exceeded'))) return { raised: false };
  const key = `machine.limit_exceeded:${refusal.licenseId}`;
  return db.transaction(async (tx) => {
    const at = now(context);
    const data = (refusedCount: number) => ({ max_machines: refusal.maxMachines, hardware_id: refusal.hardwareId, refused_count: refusedCount });
    const inserted = await tx.query('INSERT INTO notification_marks (key, at, count) VALUES (?, ?, 0) ON CONFLICT (key) DO NOTHING RETURNING key', [key, at.toISOString()]);
    if (inserted.length > 0) {
      await raiseLicenseEvent(tx, 'machine.limit_exceeded', refusal.licenseId, data(1), context);
      return { raised: true };
    }
    const [mark] = await tx.query('UPDATE notification_marks SET count = count + 1 WHERE key = ? RETURNING at, count', [key]);
    if (!mark) return { raised: false };
    if (at.getTime() - Date.parse(asIso(mark.at)) < LIMIT_EXCEEDED_INTERVAL_MS) return { raised: false };
    await tx.execute('UPDATE notification_marks SET at = ?, count = 0 WHERE key = ?', [at.toISOString(), key]);
    await raiseLicenseEvent(tx, 'machine.limit_exceeded', refusal.licenseId, data(asInt(mark.count)), context);
    return { raised: true };
  });
}

/**
 * countMachineRefusal as the refusing request calls it: a notification never changes the
 * answer of what raised it, so a failure here (a busy database) is dropped, and the refusal
 * is answered as it would have been.
 */
export async function noteMachineRefusal(db: Database, refusal: MachineRefusal, context: Pick<OperationContext, 'clock'>): Promise<void> {
  await countMachineRefusal(db, refusal, context).catch(() => undefined);
}
