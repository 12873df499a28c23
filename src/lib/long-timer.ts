/**
 * The longest delay Node's setTimeout holds (about 24.8 days). A longer one fires after 1 ms
 * with a TimeoutOverflowWarning, so a year-long grace token or a yearly backup schedule would
 * fire at once, again and again.
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** The part of a clock a timer needs: the wall time and one-shot timers. */
export interface TimerClock {
  now(): Date;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface LongTimer {
  cancel(): void;
}

/**
 * Calls `callback` once the clock reads `deadline` (ms since the epoch) or later, however far
 * away that is: a chain of timers of at most MAX_TIMER_DELAY_MS, each re-reading the clock
 * when it fires, so a wait of a year is about fifteen timers and never one that overflows.
 */
export function setTimerUntil(clock: TimerClock, deadline: number, callback: () => void): LongTimer {
  if (Number.isNaN(deadline)) throw new RangeError('a timer deadline must be a number');
  return chain(clock, () => deadline - clock.now().getTime(), callback);
}

/**
 * Calls `callback` after `ms` of elapsed time, however long: a chain of timers of at most
 * MAX_TIMER_DELAY_MS that counts the time waited instead of reading the wall clock, so a
 * clock set back or forward neither postpones nor hastens it (a retry interval is a duration).
 */
export function setLongTimeout(clock: TimerClock, ms: number, callback: () => void): LongTimer {
  if (Number.isNaN(ms)) throw new RangeError('a timer delay must be a number');
  return chain(clock, (waited) => ms - waited, callback);
}

/** The callback always runs from a timer, never synchronously, even when nothing is left to wait. */
function chain(clock: TimerClock, remaining: (waited: number) => number, callback: () => void): LongTimer {
  let handle: unknown;
  let cancelled = false;
  let waited = 0;
  const wait = () => {
    const hop = Math.min(Math.max(0, remaining(waited)), MAX_TIMER_DELAY_MS);
    handle = clock.setTimeout(() => {
      handle = undefined;
      if (cancelled) return;
      waited += hop;
      if (remaining(waited) <= 0) callback();
      else wait();
    }, hop);
  };
  wait();
  return {
    cancel() {
      cancelled = true;
      if (handle !== undefined) clock.clearTimeout(handle);
      handle = undefined;
    },
  };
}
