import type { TimerClock } from '../long-timer.js';
import { SlotRuns } from '../slot-runs.js';
import type { Database } from '../storage/types.js';
import { scanLicenseDeadlines } from './license-clock.js';

export interface LicenseClockOptions {
  readonly database: () => Database;
  readonly clock: TimerClock;
  /** Read at each round, so that a reloaded configuration applies from the next one. */
  readonly windows: () => readonly number[];
  /** Minutes between rounds (default 15): how late past its moment an event may be. */
  readonly intervalMinutes?: number;
  readonly log?: (entry: Record<string, unknown>) => void;
}

export interface LicenseClockRound {
  readonly slot: string;
  /** False when another daemon had claimed the round. */
  readonly ran: boolean;
  readonly raised: number;
}

/**
 * Runs scanLicenseDeadlines at start (the catch-up after downtime) and then at every
 * interval boundary (:00, :15, ...). Daemons sharing one database run each round once
 * between them: a round is claimed by inserting the mark `scan:<round start>`, and only the
 * daemon whose insert wins scans. A round whose scan fails is not retried: the next one
 * finds everything it would have (the scan looks at the licenses' times, not at the last
 * round's).
 */
export class LicenseClockScheduler {
  private readonly intervalMs: number;
  private readonly runs: SlotRuns;

  constructor(private readonly options: LicenseClockOptions) {
    const minutes = options.intervalMinutes ?? 15;
    if (!Number.isFinite(minutes) || minutes <= 0) throw new RangeError(`the license clock's interval must be a positive number of minutes, got ${minutes}`);
    this.intervalMs = minutes * 60_000;
    this.runs = new SlotRuns(options.clock, (now) => new Date(this.slotOf(now).getTime() + this.intervalMs), (slot) => this.round(slot));
  }

  /** The catch-up round, then the schedule; resolves once the catch-up is done. */
  async start(): Promise<LicenseClockRound | undefined> {
    const result = await this.runs.track(this.round(this.slotOf(this.options.clock.now())));
    this.runs.arm();
    return result;
  }

  stop(): void {
    this.runs.stop();
  }

  /** Waits for a round in progress (for a graceful shutdown, and for tests). */
  idle(): Promise<void> {
    return this.runs.idle();
  }

  private slotOf(at: Date): Date {
    return new Date(Math.floor(at.getTime() / this.intervalMs) * this.intervalMs);
  }

  /** Never throws: a failed round is logged, and the schedule goes on. */
  private async round(slot: Date): Promise<LicenseClockRound | undefined> {
    if (this.runs.isStopped) return undefined;
    try {
      const db = this.options.database();
      const now = this.options.clock.now();
      const claimed = await db.transaction((tx) =>
        tx.query('INSERT INTO notification_marks (key, at, count) VALUES (?, ?, 1) ON CONFLICT (key) DO NOTHING RETURNING key', [`scan:${slot.toISOString()}`, now.toISOString()]),
      );
      if (claimed.length === 0) return { slot: slot.toISOString(), ran: false, raised: 0 };
      const { raised } = await scanLicenseDeadlines(db, { now, windows: this.options.windows() });
      if (raised > 0) this.options.log?.({ level: 'info', msg: 'license deadline events raised', slot: slot.toISOString(), raised });
      return { slot: slot.toISOString(), ran: true, raised };
    } catch (error) {
      this.options.log?.({ level: 'error', msg: 'license deadline scan failed', slot: slot.toISOString(), error: error instanceof Error ? error.message : String(error) });
      return undefined;
    }
  }
}

/** The wall clock and Node's timers, for the daemon. */
export const SYSTEM_CLOCK: TimerClock = {
  now: () => new Date(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

