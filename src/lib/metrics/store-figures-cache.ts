import type { StoreFigures } from './store-figures.js';

/**
 * The store's figures, read in the background and kept for scrapes (docs/metrics.md, "How the
 * store's figures are read"). Counting seats reads the whole machines table, seconds at a
 * million machines: a scrape that read them itself would pay that every time, and every
 * daemon scraped every few seconds would keep the database busy with it. Here one read runs
 * at a time, `interval` after the previous one ended, and a scrape only renders the newest.
 */
export interface StoreFiguresSnapshot {
  /** The newest read that succeeded; undefined before the first. */
  readonly figures: StoreFigures | undefined;
  /** When that read started (the figures are as of then), ms since 1970 on the cache's clock. */
  readonly readAt: number | undefined;
  /** How long that read took. */
  readonly readSeconds: number | undefined;
  /** Whether the newest read that finished failed. */
  readonly failed: boolean;
  /** The wait between reads now: the configured interval, or longer after a slow read. */
  readonly intervalMs: number;
}

/**
 * A read waits at least this many times the previous read's duration, so that reading takes at
 * most 1 / (1 + READ_SPACING) of the time (5 %) however large the store is.
 */
export const READ_SPACING = 19;

/** The figures count as stale, and license_server_store_up says 0, past this many intervals. */
export const STALE_AFTER_INTERVALS = 3;

/** The wait after a read that took `readMs`: the configured interval, or longer for a slow read. */
export function waitAfterRead(intervalMs: number, readMs: number): number {
  return Math.max(intervalMs, READ_SPACING * readMs);
}

export interface StoreFiguresCacheOptions {
  /** One read of the figures as of `at` (readStoreFigures on the admin database). */
  readonly read: (at: Date) => Promise<StoreFigures>;
  /** The configured interval, asked before each wait (the configuration may be reloaded). */
  readonly intervalMs: () => number;
  readonly clock: () => Date;
  /** A failed read, for the daemon's log; the cache keeps the previous figures. */
  readonly onError?: (error: unknown) => void;
}

export class StoreFiguresCache {
  private figures: StoreFigures | undefined;
  private readAt: number | undefined;
  private readSeconds: number | undefined;
  private failed = false;
  private lastReadMs = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: StoreFiguresCacheOptions) {}

  /** Reads now, then keeps reading until close(). */
  start(): void {
    this.schedule(0);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  snapshot(): StoreFiguresSnapshot {
    return {
      figures: this.figures,
      readAt: this.readAt,
      readSeconds: this.readSeconds,
      failed: this.failed,
      intervalMs: waitAfterRead(this.options.intervalMs(), this.lastReadMs),
    };
  }

  /** Seconds since the figures' read started; undefined before the first good read. */
  ageSeconds(): number | undefined {
    return this.readAt === undefined ? undefined : Math.max(0, (this.options.clock().getTime() - this.readAt) / 1000);
  }

  /** The figures are fresh: the newest read succeeded and they are not older than STALE_AFTER_INTERVALS. */
  fresh(): boolean {
    const age = this.ageSeconds();
    return !this.failed && age !== undefined && age * 1000 <= STALE_AFTER_INTERVALS * this.snapshot().intervalMs;
  }

  private schedule(delayMs: number): void {
    this.armUntil(performance.now() + delayMs);
  }

  /**
   * A timer fires up to about 1.6 ms before its delay by performance.now() (Node counts the
   * loop's whole milliseconds): CI saw a read begin 388.6 ms after one of 20.5 ms, under 19
   * times as long. A timer that fires early waits out the rest.
   */
  private armUntil(due: number): void {
    if (this.closed) return;
    const left = due - performance.now();
    this.timer = setTimeout(() => (performance.now() < due ? this.armUntil(due) : void this.readOnce()), Math.max(0, Math.ceil(left)));
    // Reading the figures never keeps a process alive.
    this.timer.unref();
  }

  private async readOnce(): Promise<void> {
    const at = this.options.clock();
    const started = performance.now();
    try {
      const figures = await this.options.read(at);
      if (this.closed) return;
      this.figures = figures;
      this.readAt = at.getTime();
      this.readSeconds = (performance.now() - started) / 1000;
      this.failed = false;
    } catch (error) {
      if (this.closed) return;
      this.failed = true;
      this.options.onError?.(error);
    } finally {
      this.lastReadMs = performance.now() - started;
    }
    this.schedule(waitAfterRead(this.options.intervalMs(), this.lastReadMs));
  }
}
