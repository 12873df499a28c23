import { CronExpressionParser } from 'cron-parser';
import type { TimerClock } from '../long-timer.js';
import { nextCronSlot, SlotRuns } from '../slot-runs.js';

export interface DrillScheduleOptions {
  readonly expression: string;
  readonly clock: TimerClock;
  /** Runs one drill; what it finds is recorded and raised there (drill.ts), not here. */
  readonly run: () => Promise<unknown>;
  readonly log?: (entry: Record<string, unknown>) => void;
}

/**
 * The daemon's restore drills on a cron schedule (local time). Unlike scheduled backups,
 * slots are not claimed in the database: a drill checks this host's backups and replicas, so
 * each daemon drills its own. A slot missed while the daemon was down is not caught up: the
 * alert on the last success's age says that drills stopped.
 */
export class DrillSchedule {
  private readonly runs: SlotRuns;

  constructor(private readonly options: DrillScheduleOptions) {
    this.runs = new SlotRuns(
      options.clock,
      nextCronSlot(options.expression),
      () =>
        options.run().then(
          () => undefined,
          (error: unknown) => options.log?.({ level: 'error', msg: 'scheduled restore drill could not run', error: String(error).slice(0, 300) }),
        ),
    );
  }

  start(): void {
    this.runs.arm();
  }

  stop(): void {
    this.runs.stop();
  }

  /** Waits for a drill in progress (for a graceful shutdown). */
  idle(): Promise<void> {
    return this.runs.idle();
  }

  nextRun(): Date | undefined {
    return this.runs.nextRun;
  }
}

const gaps = new Map<string, number>();

/** The longest gap between two of the next 32 slots of `expression`, in seconds (cached: the schedule changes only with a restart). */
export function longestGapSeconds(expression: string): number {
  const known = gaps.get(expression);
  if (known !== undefined) return known;
  const slots = CronExpressionParser.parse(expression).take(32).map((slot) => slot.getTime());
  let longest = 0;
  for (let i = 1; i < slots.length; i += 1) longest = Math.max(longest, slots[i]! - slots[i - 1]!);
  gaps.set(expression, longest / 1000);
  return longest / 1000;
}
