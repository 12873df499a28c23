/**
 * Token buckets per client address: `burst` requests at once, refilled at `perSecond`.
 * In memory and per process; several daemons behind one address each count on their own.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updated: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly clock: () => number = () => Date.now(),
  ) {
    // Full buckets carry no information; dropping them bounds memory by recent clients.
    this.sweeper = setInterval(() => this.sweep(), 60_000).unref();
  }

  /** 0 when the request may go ahead, else the seconds to wait before the next one may. */
  take(key: string): number {
    if (this.perSecond <= 0) return 0;
    const now = this.clock();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, updated: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.updated) / 1000) * this.perSecond);
    bucket.updated = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond));
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  private sweep(): void {
    const now = this.clock();
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.updated) / 1000) * this.perSecond >= this.burst) this.buckets.delete(key);
    }
  }
}
