import type { ResolvedConfig } from '../../config/resolve.js';
import type { OperationContext } from '../../context.js';
import type { Database } from '../../storage/types.js';
import { listBackups } from '../repository.js';
import { claimDueCopies, copyOwner, finishCopy, notePendingCopies, type CopyRetry } from './copies.js';
import { clearUnlistedArchives, listTargetBackups, type CopyOutcome } from './copy.js';
import { openTarget } from './open.js';
import { copyAndPrune, raiseCopyFailed } from './replicate.js';

export interface CopierOptions {
  readonly database: () => Database;
  readonly config: () => ResolvedConfig;
  readonly log: (entry: Record<string, unknown>) => void;
  readonly clock?: () => Date;
  readonly retry?: CopyRetry;
  /** How often due copies are looked for (ms). */
  readonly pollMs?: number;
  /** How often each target is compared with the local backups (ms): the catch-up. */
  readonly catchUpMs?: number;
}

const CONTEXT: OperationContext = { actor: 'scheduler' };

/** How often a daemon looks for due copies when nothing wakes it (CopierOptions.pollMs). */
export const COPY_POLL_MS = 30_000;

/**
 * The daemon's off-site copies: every backup it makes (API, schedule, a restore's safety
 * backup) is noted in backup_copies and copied here, off the request; a failed copy is
 * retried on the backoff schedule (copies.ts), and every `catchUpMs` each target is compared
 * with the local backups, so that what an outage or a restore left out is copied, oldest
 * first. On PostgreSQL several daemons share the notes, and a claim gives each copy to one.
 */
export class Copier {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private lastCatchUp = 0;
  /** The name of this copier's claims: its own, so that a request to the daemon's API copying the same backup is refused its claim ('busy'). */
  readonly owner = copyOwner();

  constructor(private readonly options: CopierOptions) {}

  start(): void {
    this.schedule(0);
  }

  /** Notes a new backup for every target and copies it soon. */
  async noteBackup(backupId: string): Promise<void> {
    const targets = this.options.config().settings.backup.targets.map((target) => target.name);
    if (targets.length === 0) return;
    await this.options.database().transaction((tx) => notePendingCopies(tx, backupId, targets, this.now()));
    this.wake();
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.schedule(0);
  }

  /**
   * Stops looking, and waits up to `graceMs` for a copy under way. One that outlives the
   * process keeps its claim, which the next process on this host to look takes over at once
   * (copies.ts), and another host's when the claim's lease ends.
   */
  async stop(graceMs = 5000): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.running) await Promise.race([this.running, new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
  }

  /**
   * One round: the catch-up and the freshness check when they are due, then every due copy.
   * Returns the outcomes (for tests).
   */
  async round(): Promise<CopyOutcome[]> {
    const config = this.options.config();
    const targets = config.settings.backup.targets;
    const db = this.options.database();
    const periodic = Date.now() - this.lastCatchUp >= (this.options.catchUpMs ?? 15 * 60_000);
    if (periodic) this.lastCatchUp = Date.now();
    if (periodic && targets.length > 0) {
      await this.catchUp(db, config).catch((error: unknown) => this.options.log({ level: 'warn', msg: 'off-site catch-up failed', error: String(error) }));
    }
    if (targets.length === 0) {
      if (periodic) await this.checkFreshness(db, config);
      return [];
    }
    const outcomes: CopyOutcome[] = [];
    // Stopping ends the round between batches: a claimed copy is always finished or recorded.
    while (!this.stopped) {
      const due = await claimDueCopies(db, this.owner, this.now(), 4);
      if (due.length === 0) break;
      const local = await listBackups(config.settings.backup.path);
      for (const copy of due) {
        const settings = targets.find((target) => target.name === copy.target);
        const record = local.find((backup) => backup.backup_id === copy.backup_id);
        if (!settings || !record) {
          // The target was removed from the configuration, or the backup pruned here: nothing left to copy.
          await db.execute('DELETE FROM backup_copies WHERE backup_id = ? AND target = ?', [copy.backup_id, copy.target]);
          continue;
        }
        const outcome = await copyAndPrune(settings, record, { directory: config.settings.backup.path, local: config.settings.backup, at: this.now(), env: config.env });
        await finishCopy(db, outcome, this.owner, this.now(), this.options.retry);
        if (outcome.result === 'failed' || outcome.result === 'refused-unencrypted') {
          await raiseCopyFailed(db, outcome, CONTEXT);
          this.options.log({ level: 'warn', msg: 'off-site copy failed', backup_id: outcome.backup_id, target: outcome.target, reason: outcome.reason, error: outcome.error });
        } else {
          this.options.log({ level: 'info', msg: 'off-site copy made', backup_id: outcome.backup_id, target: outcome.target, result: outcome.result, bytes: outcome.bytes ?? null });
        }
        outcomes.push(outcome);
      }
    }
    if (periodic) await this.checkFreshness(db, config);
    return outcomes;
  }

  /**
   * backup.stale, once per place and newest backup: the mark `backup.stale:<place>:<newest id>`
   * in notification_marks is taken by one daemon, once; a newer backup there makes a new key,
   * so the alert comes again only when that one goes stale too.
   */
  private async checkFreshness(db: Database, config: ResolvedConfig): Promise<void> {
    const maxAgeMs = config.settings.backup.maxAgeMs;
    if (maxAgeMs === undefined) return;
    const { backupStatus } = await import('../status.js');
    const { raiseEvent } = await import('../../notifications/outbox.js');
    try {
      const at = this.now();
      for (const place of await backupStatus({ config, db, at, maxAgeMs })) {
        if (!place.stale) continue;
        await db.transaction(async (tx) => {
          const won = await tx.query('INSERT INTO notification_marks (key, at, count) VALUES (?, ?, 1) ON CONFLICT (key) DO NOTHING RETURNING key', [
            `backup.stale:${place.place}:${place.newest_backup_id ?? 'none'}`, at.toISOString(),
          ]);
          if (won.length === 0) return;
          await raiseEvent(tx, 'backup.stale', {
            place: place.place,
            newest_backup_id: place.newest_backup_id,
            newest_created_at: place.newest_created_at,
            age_hours: place.age_seconds === null ? null : Math.round(place.age_seconds / 360) / 10,
            max_age_hours: Math.round(maxAgeMs / 360_000) / 10,
            last_error: place.unreachable ?? place.last_error,
          }, { clock: () => at });
          this.options.log({ level: 'warn', msg: 'backup stale', place: place.place, newest_backup_id: place.newest_backup_id });
        });
      }
    } catch (error) {
      this.options.log({ level: 'warn', msg: 'backup freshness check failed', error: String(error) });
    }
  }

  /** Notes, for each target, the local backups it does not hold. */
  private async catchUp(db: Database, config: ResolvedConfig): Promise<void> {
    const local = await listBackups(config.settings.backup.path);
    if (local.length === 0) return;
    for (const settings of config.settings.backup.targets) {
      let held: Set<string>;
      try {
        const target = await openTarget(settings, config.env);
        try {
          held = new Set((await listTargetBackups(target)).map((record) => record.backup_id));
          // What interrupted uploads and prunes left, old enough that no copy running now made it.
          const cutOff = new Date(this.now().getTime() - 6 * 3600_000);
          await target.clearDebris(cutOff).catch(() => 0);
          await clearUnlistedArchives(target, cutOff).catch(() => 0);
        } finally {
          await target.close().catch(() => undefined);
        }
      } catch {
        continue; // down: its pending copies are retried on their own schedule
      }
      const missing = local.filter((record) => !held.has(record.backup_id)).map((record) => record.backup_id);
      if (missing.length === 0) continue;
      await db.transaction(async (tx) => {
        for (const id of missing) await notePendingCopies(tx, id, [settings.name], this.now(), true);
      });
    }
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.running = this.round()
        .then(() => undefined, (error: unknown) => this.options.log({ level: 'error', msg: 'off-site copies failed', error: String(error) }))
        .finally(() => {
          this.running = undefined;
          const next = this.again ? 0 : this.options.pollMs ?? COPY_POLL_MS;
          this.again = false;
          this.schedule(next);
        });
    }, delay);
    this.timer.unref();
  }

  private now(): Date {
    return this.options.clock ? this.options.clock() : new Date();
  }
}
