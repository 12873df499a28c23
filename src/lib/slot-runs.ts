import { CronExpressionParser } from 'cron-parser';
import { setTimerUntil, type LongTimer, type TimerClock } from './long-timer.js';

/** The next slot of a cron expression (local time) after `now`: SlotRuns' nextSlot for cron schedules. */
export function nextCronSlot(expression: string): (now: Date) => Date {
  return (now) => CronExpressionParser.parse(expression, { currentDate: now }).next().toDate();
}

/**
 * What the daemon's schedules share (backup/scheduler.ts, backup/drill-schedule.ts,
 * notifications/license-clock-scheduler.ts): one run at a time at the next slot, the next slot
 * armed once a run ends, a stop that arms nothing more, and a wait for the run in progress
 * (for a graceful shutdown).
 */
export class SlotRuns {
  private timer: LongTimer | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;
  private armedFor: Date | undefined;

  constructor(
    private readonly clock: TimerClock,
    /** The next slot after now; `run` runs at it. */
    private readonly nextSlot: (now: Date) => Date,
    private readonly run: (slot: Date) => Promise<unknown>,
  ) {}

  /** Arms the next slot (after a catch-up run, if the schedule has one: track() it). */
  arm(): void {
    if (this.stopped) return;
    const next = this.nextSlot(this.clock.now());
    this.armedFor = next;
    this.timer = setTimerUntil(this.clock, next.getTime(), () => {
      this.timer = undefined;
      const run = this.run(next).finally(() => this.arm());
      // The schedules log their own failures; one that escapes must not end the daemon.
      run.catch(() => undefined);
      this.track(run);
    });
  }

  /** A run started outside the timer (a catch-up at start), waited for by idle(). */
  track<T>(promise: Promise<T>): Promise<T> {
    this.running = promise;
    return promise;
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
  }

  /** The slot the timer waits for; undefined before the first arm(). */
  get nextRun(): Date | undefined {
    return this.armedFor;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Waits for a run in progress. */
  async idle(): Promise<void> {
    await this.running?.catch(() => undefined);
  }
}
