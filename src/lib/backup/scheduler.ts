import { hostname } from 'node:os';
import { CronExpressionParser } from 'cron-parser';
import type { TimerClock } from '../long-timer.js';
import { nextCronSlot, SlotRuns } from '../slot-runs.js';
import type { Database } from '../storage/types.js';
import { asIso } from '../storage/values.js';

export type SchedulerClock = TimerClock;

export interface ScheduledRun {
  readonly slot: string;
  readonly status: 'running' | 'succeeded' | 'failed';
  readonly claimed_by: string;
  readonly finished_at: string | null;
  readonly backup_id: string | null;
  readonly error: string | null;
}

export interface SchedulerStatus {
  readonly enabled: boolean;
  readonly schedule: string;
  readonly next_run: string | null;
  readonly last_run: ScheduledRun | null;
}

export interface SchedulerOptions {
  readonly expression: string;
  readonly database: () => Database;
  /** Makes the backup (and applies retention); its id is recorded with the slot. */
  readonly run: (slot: Date) => Promise<{ backup_id: string }>;
  /** The newest listed backup's creation time, for the catch-up at start. */
  readonly newestBackup: () => Promise<Date | undefined>;
  readonly clock: SchedulerClock;
  readonly onResult?: (run: ScheduledRun) => void;
  readonly log?: (entry: Record<string, unknown>) => void;
}

/**
 * Automatic backups on a cron schedule (local time). Each slot is claimed with an insert into
 * backup_runs before it runs, so daemons sharing one PostgreSQL database run each scheduled
 * backup exactly once between them. At start, a slot missed while no daemon ran (the newest
 * backup is older than the last slot) is caught up once.
 */
export class BackupScheduler {
  private readonly owner = `${hostname()}:${process.pid}`;
  // A yearly slot is further away than one setTimeout holds: SlotRuns reaches it with a chain of timers.
  private readonly runs: SlotRuns;

  constructor(private readonly options: SchedulerOptions) {
    this.runs = new SlotRuns(
      options.clock,
      nextCronSlot(options.expression),
      (slot) => this.runSlot(slot),
    );
  }

  async start(): Promise<void> {
    const now = this.options.clock.now();
    const previous = this.slotBefore(now);
    const newest = await this.options.newestBackup();
    if (!newest || newest.getTime() < previous.getTime()) {
      this.options.log?.({ msg: 'catching up a missed scheduled backup', slot: previous.toISOString() });
      await this.runs.track(this.runSlot(previous));
    }
    this.runs.arm();
  }

  stop(): void {
    this.runs.stop();
  }

  /** Waits for a run in progress (for a graceful shutdown). */
  idle(): Promise<void> {
    return this.runs.idle();
  }

  async status(): Promise<SchedulerStatus> {
    const rows = await this.options.database().query('SELECT slot, status, claimed_by, finished_at, backup_id, error FROM backup_runs ORDER BY slot DESC LIMIT 1');
    return {
      enabled: true,
      schedule: this.options.expression,
      next_run: this.runs.nextRun?.toISOString() ?? null,
      last_run: rows[0] ? toRun(rows[0]) : null,
    };
  }

  private slotBefore(now: Date): Date {
    // A slot at exactly `now` counts as past: prev() of a moment just after it.
    return CronExpressionParser.parse(this.options.expression, { currentDate: new Date(now.getTime() + 1) }).prev().toDate();
  }

  /** Claims the slot; runs the backup only when this daemon's insert won. */
  private async runSlot(slot: Date): Promise<void> {
    const db = this.options.database();
    const at = this.options.clock.now().toISOString();
    const claimed = await db.transaction((tx) =>
      tx.query('INSERT INTO backup_runs (slot, claimed_by, claimed_at, status) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING slot', [
        slot.toISOString(), this.owner, at, 'running',
      ]),
    );
    if (claimed.length === 0) {
      this.options.log?.({ msg: 'scheduled backup taken by another daemon', slot: slot.toISOString() });
      return;
    }
    let outcome: { status: 'succeeded' | 'failed'; backup_id: string | null; error: string | null };
    try {
      const record = await this.options.run(slot);
      outcome = { status: 'succeeded', backup_id: record.backup_id, error: null };
    } catch (error) {
      outcome = { status: 'failed', backup_id: null, error: error instanceof Error ? error.message : String(error) };
    }
    await this.options.database().execute('UPDATE backup_runs SET status = ?, finished_at = ?, backup_id = ?, error = ? WHERE slot = ?', [
      outcome.status, this.options.clock.now().toISOString(), outcome.backup_id, outcome.error, slot.toISOString(),
    ]);
    const run: ScheduledRun = { slot: slot.toISOString(), claimed_by: this.owner, finished_at: this.options.clock.now().toISOString(), ...outcome };
    this.options.log?.({ msg: 'scheduled backup', ...run });
    this.options.onResult?.(run);
  }
}

function toRun(row: Record<string, unknown>): ScheduledRun {
  return {
    slot: asIso(row.slot),
    status: row.status as ScheduledRun['status'],
    claimed_by: String(row.claimed_by),
    finished_at: row.finished_at === null ? null : asIso(row.finished_at),
    backup_id: row.backup_id === null ? null : String(row.backup_id),
    error: row.error === null ? null : String(row.error),
  };
}
