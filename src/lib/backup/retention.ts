import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { syncDirectory } from '../files/durable-write.js';
import { asWriteFailure } from '../fs-errors.js';
import type { Database } from '../storage/types.js';
import { clearDebris } from './locks/debris.js';
import { acquireBackupLock } from './locks/lock.js';
import { listBackups, removePruned, unlistForPrune, type BackupRecord } from './repository.js';

export interface RetentionPolicy {
  readonly retentionDays: number;
  readonly keepDaily: number;
  readonly keepWeekly: number;
  readonly keepMonthly: number;
}

export interface RetentionPlan {
  readonly keep: ReadonlyArray<{ readonly backup: BackupRecord; readonly reasons: readonly string[] }>;
  readonly remove: readonly BackupRecord[];
}

/**
 * Which listed backups to keep (docs/configuration.md, "Retention"): the newest always; every
 * backup at most retention_days old; and grandfather-father-son keeps: the newest backup of
 * each of the last keep_daily days, keep_weekly ISO weeks and keep_monthly months that have
 * one (UTC), counted independently as restic does. A rule that finds fewer periods than it
 * asks for also keeps the oldest backup, as borg does since 1.2: otherwise a young history
 * would lose its beginning to the monthly rule (after 95 days of daily backups, the newest of
 * the first month is younger than 90 days while older ones exist). Everything else goes.
 * Only listed (complete, verified) backups are counted.
 */
export function planRetention(backups: readonly BackupRecord[], policy: RetentionPolicy, at: Date): RetentionPlan {
  const newestFirst = [...backups].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
  const reasons = new Map<string, string[]>();
  const keep = (backup: BackupRecord, reason: string) => reasons.set(backup.backup_id, [...(reasons.get(backup.backup_id) ?? []), reason]);
  if (newestFirst[0]) keep(newestFirst[0], 'newest');
  const cutoff = at.getTime() - policy.retentionDays * 86_400_000;
  for (const backup of newestFirst) if (Date.parse(backup.created_at) >= cutoff) keep(backup, `at most ${policy.retentionDays} days old`);
  const bucketed = (count: number, label: string, bucket: (date: Date) => string) => {
    if (count <= 0) return;
    const seen = new Set<string>();
    for (const backup of newestFirst) {
      if (seen.size >= count) break;
      const key = bucket(new Date(backup.created_at));
      if (seen.has(key)) continue;
      seen.add(key);
      keep(backup, `${label} ${key}`);
    }
    const oldest = newestFirst[newestFirst.length - 1];
    if (oldest && seen.size < count) keep(oldest, `${label}: the oldest (only ${seen.size} of ${count} have a backup)`);
  };
  bucketed(policy.keepDaily, 'daily', (date) => date.toISOString().slice(0, 10));
  bucketed(policy.keepWeekly, 'weekly', isoWeek);
  bucketed(policy.keepMonthly, 'monthly', (date) => date.toISOString().slice(0, 7));
  return {
    keep: newestFirst.filter((b) => reasons.has(b.backup_id)).map((backup) => ({ backup, reasons: reasons.get(backup.backup_id)! })),
    remove: newestFirst.filter((b) => !reasons.has(b.backup_id)),
  };
}

/** `2026-W47`: ISO 8601 week-numbering year and week. */
export function isoWeek(date: Date): string {
  const day = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()));
  const weekday = day.getUTCDay() || 7;
  day.setUTCDate(day.getUTCDate() + 4 - weekday);
  const yearStart = Date.UTC(day.getUTCFullYear(), 0, 1);
  const week = Math.ceil(((day.getTime() - yearStart) / 86_400_000 + 1) / 7);
  return `${day.getUTCFullYear()}-W${String(week).padStart(2, '0')}`;
}

/** Applies the plan under the backup lock (never while a restore reads a backup), audited. */
export async function pruneBackups(options: {
  directory: string;
  policy: RetentionPolicy;
  context: OperationContext;
  dryRun?: boolean;
  db?: Database;
  databaseUrl?: string;
  /** The backup key, to verify an interrupted create's archive before listing it. */
  key?: Buffer;
}): Promise<RetentionPlan> {
  const release = options.dryRun
    ? async () => undefined
    : await acquireBackupLock(options.directory, 'prune', now(options.context), options.databaseUrl);
  try {
    if (!options.dryRun) await clearDebris({ directory: options.directory, databaseUrl: options.databaseUrl, locked: { db: options.db, context: options.context, key: options.key } });
    const plan = planRetention(await listBackups(options.directory), options.policy, now(options.context));
    if (options.dryRun || plan.remove.length === 0) return plan;
    const removed = plan.remove.map((backup) => backup.backup_id);
    const writeFailed = `cannot remove backups from ${options.directory}`;
    // Unlist all, audit, then delete: a kill anywhere leaves marks the next lock holder
    // finishes the prune from, writing the audit entry if this one did not (debris.ts).
    try {
      for (const id of removed) await unlistForPrune(options.directory, id);
      await syncDirectory(options.directory);
    } catch (error) {
      throw asWriteFailure(error, writeFailed);
    }
    if (options.db) {
      await options.db.transaction((tx) =>
        recordAudit(tx, options.context, { action: 'backup.pruned', entityType: 'backup', details: { removed, kept: plan.keep.length } }),
      );
    }
    try {
      for (const id of removed) await removePruned(options.directory, id);
      await syncDirectory(options.directory);
    } catch (error) {
      throw asWriteFailure(error, writeFailed);
    }
    return plan;
  } finally {
    await release();
  }
}
