import type { ResolvedConfig } from '../../config/resolve.js';
import { now, type OperationContext } from '../../context.js';
import { raiseEvent } from '../../notifications/outbox.js';
import type { Database } from '../../storage/types.js';
import { listBackups, type BackupRecord } from '../repository.js';
import { claimCopy, copyOwner, finishCopy, notePendingCopies, type CopyRetry } from './copies.js';
import { copyBackup, listTargetBackups, pruneTarget, type CopyOutcome } from './copy.js';
import type { RetentionPolicy } from '../retention.js';
import { openTarget, selectTargets } from './open.js';
import { targetRetention, type TargetSettings } from './settings.js';
import { isTargetError } from './target.js';

export interface ReplicateOptions {
  readonly db: Database;
  readonly config: ResolvedConfig;
  /** The backup directory that holds `record`. */
  readonly directory: string;
  readonly record: BackupRecord;
  readonly context: OperationContext;
  /** Only these targets (`backup copy --to`); every configured one when undefined. */
  readonly only?: readonly string[];
  readonly signal?: AbortSignal;
  /** The backoff of a failed copy's retries (copies.ts DEFAULT_COPY_RETRY). */
  readonly retry?: CopyRetry;
  /** Per target, as its copy starts and ends: progress for a terminal, lines for a log. */
  readonly onTarget?: (target: string, event: { readonly phase: 'start' } | { readonly phase: 'end'; readonly outcome: CopyOutcome }) => void;
}

/**
 * Copies a verified local backup to the configured targets, all at once, each on its own:
 * one target down does not hold the others up, and nothing here ever fails the backup
 * itself. Each copy is noted in backup_copies first and claimed, so a copy another attempt
 * holds (another process's, or in a daemon its copier's or another request's) is left to it
 * ('busy'); each failure is recorded for its retry and raises `backup.copy_failed`.
 */
export async function copyToTargets(options: ReplicateOptions): Promise<CopyOutcome[]> {
  const targets = selectTargets(options.config.settings.backup.targets, options.only);
  if (targets.length === 0) return [];
  const { db, record, context } = options;
  await db.transaction((tx) => notePendingCopies(tx, record.backup_id, targets.map((target) => target.name), now(context), true));
  // An attempt of its own: inside a daemon, its copier or another request may be copying it now.
  const owner = copyOwner();
  return Promise.all(targets.map((target) => copyOne(target, owner, options)));
}

async function copyOne(settings: TargetSettings, owner: string, options: ReplicateOptions): Promise<CopyOutcome> {
  const { db, record, context } = options;
  if (!(await claimCopy(db, record.backup_id, settings.name, owner, now(context)))) {
    return { target: settings.name, backup_id: record.backup_id, result: 'busy', error: 'another copy of it to this target is under way now, or it is copied' };
  }
  options.onTarget?.(settings.name, { phase: 'start' });
  const outcome = await copyAndPrune(settings, record, {
    directory: options.directory,
    local: options.config.settings.backup,
    at: now(context),
    env: options.config.env,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  await finishCopy(db, outcome, owner, now(context), options.retry).catch(() => undefined);
  if (outcome.result === 'failed' || outcome.result === 'refused-unencrypted') await raiseCopyFailed(db, outcome, context);
  options.onTarget?.(settings.name, { phase: 'end', outcome });
  return outcome;
}

/**
 * One claimed copy, start to end: the target opened (its credentials read now), the backup
 * copied and checked, then the target's own retention applied. Never throws: a failure is
 * the outcome. A prune that fails leaves the copy good; the next one prunes.
 */
export async function copyAndPrune(
  settings: TargetSettings,
  record: BackupRecord,
  options: { directory: string; local: RetentionPolicy; at: Date; env: Readonly<Record<string, string | undefined>>; signal?: AbortSignal },
): Promise<CopyOutcome> {
  let target;
  try {
    target = await openTarget(settings, options.env);
  } catch (error) {
    // A credential that cannot be read, a kind this build lacks.
    return { target: settings.name, backup_id: record.backup_id, result: 'failed', reason: isTargetError(error) ? error.reason : 'auth', error: (error as Error).message };
  }
  try {
    const outcome = await copyBackup(target, options.directory, record, { allowUnencrypted: settings.allowUnencrypted, ...(options.signal ? { signal: options.signal } : {}) });
    if (outcome.result !== 'copied' && outcome.result !== 'present') return outcome;
    const plan = await pruneTarget(target, targetRetention(settings, options.local), options.at).catch(() => undefined);
    return plan && plan.remove.length > 0 ? { ...outcome, pruned: plan.remove.map((backup) => backup.backup_id) } : outcome;
  } finally {
    await target.close().catch(() => undefined);
  }
}

export async function raiseCopyFailed(db: Database, outcome: CopyOutcome, context: OperationContext): Promise<void> {
  await db
    .transaction(async (tx) => {
      const rows = await tx.query('SELECT attempts FROM backup_copies WHERE backup_id = ? AND target = ?', [outcome.backup_id, outcome.target]);
      await raiseEvent(tx, 'backup.copy_failed', {
        backup_id: outcome.backup_id,
        target: outcome.target,
        reason: outcome.reason ?? 'protocol',
        error: outcome.error ?? outcome.result,
        attempts: Number(rows[0]?.attempts ?? 1),
        actor: context.actor,
      }, context);
    })
    .catch(() => undefined);
}

/** The summary line's words for the targets: `copied to nas, offsite; NOT copied to vault (timeout: ...)`. */
export function describeCopies(outcomes: readonly CopyOutcome[]): string {
  const good = outcomes
    .filter((outcome) => outcome.result === 'copied' || outcome.result === 'present')
    .map((outcome) => (outcome.pruned?.length ? `${outcome.target} (pruned ${outcome.pruned.length} old there)` : outcome.target));
  const busy = outcomes.filter((outcome) => outcome.result === 'busy').map((outcome) => outcome.target);
  const bad = outcomes.filter((outcome) => outcome.result === 'failed' || outcome.result === 'refused-unencrypted');
  const parts: string[] = [];
  if (good.length > 0) parts.push(`copied to ${good.join(', ')}`);
  if (busy.length > 0) parts.push(`being copied to ${busy.join(', ')} by another process`);
  if (bad.length > 0) parts.push(`NOT copied to ${bad.map((outcome) => `${outcome.target} (${outcome.reason}: ${outcome.error})`).join(', ')}`);
  return parts.join('; ');
}

export function copiesFailed(outcomes: readonly CopyOutcome[]): CopyOutcome[] {
  return outcomes.filter((outcome) => outcome.result === 'failed' || outcome.result === 'refused-unencrypted');
}

/**
 * Catch-up after an outage: copies every local backup a target does not hold, oldest first,
 * so that the target's history fills in order and its newest copy is the last to arrive.
 * What the target holds is read from the target. Stops at a target's first failure: the
 * next run goes on from there.
 */
export async function copyMissing(options: Omit<ReplicateOptions, 'record'>): Promise<CopyOutcome[]> {
  const targets = selectTargets(options.config.settings.backup.targets, options.only);
  const local = (await listBackups(options.directory)).slice().reverse();
  const outcomes: CopyOutcome[] = [];
  for (const settings of targets) {
    let held: Set<string>;
    try {
      const target = await openTarget(settings, options.config.env);
      try {
        held = new Set((await listTargetBackups(target)).map((record) => record.backup_id));
      } finally {
        await target.close().catch(() => undefined);
      }
    } catch (error) {
      outcomes.push({ target: settings.name, backup_id: '', result: 'failed', reason: isTargetError(error) ? error.reason : 'protocol', error: (error as Error).message });
      continue;
    }
    for (const record of local) {
      if (held.has(record.backup_id)) continue;
      const [outcome] = await copyToTargets({ ...options, record, only: [settings.name] });
      outcomes.push(outcome!);
      if (outcome!.result === 'failed') break;
    }
  }
  return outcomes;
}
