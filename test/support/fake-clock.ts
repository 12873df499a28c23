import type { Clock } from '../../src/client/options.js';
import { scaledMs } from './busy-machine.js';

/** The longest delay Node's setTimeout holds (2^31-1 ms, about 24.8 days). */
export const NODE_MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * A clock whose time moves only when the test says, with timers that fire as it does.
 * As in Node, timers run on elapsed (monotonic) time: set() changes the wall clock only.
 * Like Node's setTimeout, a delay above 2^31-1 ms fires after 1 ms; each such delay is
 * recorded in `overflows`, where Node would emit a TimeoutOverflowWarning.
 */
export class FakeClock implements Clock {
  readonly overflows: number[] = [];
  private time: number;
  /** Elapsed time since the clock was made, which timers are measured on. */
  private elapsed = 0;
  private readonly timers = new Map<number, { at: number; ms: number; callback: () => void }>();
  private nextId = 1;

  constructor(start: Date | number = Date.now()) {
    this.time = typeof start === 'number' ? start : start.getTime();
  }

  now(): Date {
    return new Date(this.time);
  }

  setTimeout(callback: () => void, ms: number): unknown {
    if (ms > NODE_MAX_TIMER_DELAY_MS) {
      this.overflows.push(ms);
      ms = 1;
    }
    const id = this.nextId++;
    this.timers.set(id, { at: this.elapsed + ms, ms, callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Delays of the timers waiting now, soonest first. */
  pending(): number[] {
    return [...this.timers.values()].sort((a, b) => a.at - b.at).map((timer) => timer.ms);
  }

  /** Moves time forward, firing every timer that falls due on the way, in order. */
  advance(ms: number): void {
    const target = this.elapsed + ms;
    for (let fired = 0; ; fired += 1) {
      // Timers that keep re-arming themselves (e.g. after an overflow) would loop for ever here.
      if (fired > 10_000) throw new Error(`more than 10,000 timers fired in one advance(${ms}): a timer loop`);
      const due = [...this.timers.entries()].filter(([, timer]) => timer.at <= target).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.time += due[1].at - this.elapsed;
      this.elapsed = due[1].at;
      due[1].callback();
    }
    this.time += target - this.elapsed;
    this.elapsed = target;
  }

  /** Sets the time outright, as a user changing the system clock would; no timer fires. */
  set(date: Date): void {
    this.time = date.getTime();
  }
}

/** Waits (in real time) until `check` holds; for effects of timers that do network I/O. */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + scaledMs(timeoutMs);
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
