import type { Clock } from '../../src/client/options.js';

/** A clock whose time moves only when the test says, with timers that fire as it does. */
export class FakeClock implements Clock {
  private time: number;
  private readonly timers = new Map<number, { at: number; ms: number; callback: () => void }>();
  private nextId = 1;

  constructor(start: Date | number = Date.now()) {
    this.time = typeof start === 'number' ? start : start.getTime();
  }

  now(): Date {
    return new Date(this.time);
  }

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + ms, ms, callback });
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
    const target = this.time + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, timer]) => timer.at <= target).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.time = due[1].at;
      due[1].callback();
    }
    this.time = target;
  }

  /** Sets the time outright, as a user changing the system clock would; no timer fires. */
  set(date: Date): void {
    this.time = date.getTime();
  }
}

/** Waits (in real time) until `check` holds; for effects of timers that do network I/O. */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
