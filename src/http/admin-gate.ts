/**
 * Client requests first. The admin GET routes may read and render thousands of rows, and
 * part of that work (rows parsed or copied in, the JSON out) runs on the daemon's one main
 * thread whichever database serves them. Two admin connections looping such pages took
 * 82% of PostgreSQL validations away even with a pool of their own (issue 24). So admin
 * reads pass one at a time, and while clients are being served each leaves a pause of
 * `yieldFactor` times its own duration before the next starts: admin reads then get at
 * most 1 / (1 + yieldFactor) of the time the clients want. Without client traffic there is
 * no pause. The pause stops at `maxPauseMs`: a read that took long mostly waited on its
 * database or reader thread, not on the main thread, and four times a 5-second statement
 * timeout would keep every operator waiting 20 s for their next page.
 */
export class AdminGate {
  private busy = false;
  private readonly waiting: Array<() => void> = [];
  private lastClientAt = 0;
  private clientsInFlight = 0;

  constructor(
    private readonly yieldFactor: number,
    /** Clients counted as active this long after their last request (ms). */
    private readonly clientQuietMs = 100,
    private readonly maxPauseMs = 1_000,
  ) {}

  /** A client request started; call the result when it is over. */
  client(): () => void {
    this.clientsInFlight += 1;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.clientsInFlight -= 1;
      this.lastClientAt = performance.now();
    };
  }

  /** Runs `work` when the admin side's turn comes. */
  async admin<T>(work: () => Promise<T>): Promise<T> {
    if (this.busy) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.busy = true;
    const started = performance.now();
    try {
      return await work();
    } finally {
      const pause = this.clientsActive() ? Math.min((performance.now() - started) * this.yieldFactor, this.maxPauseMs) : 0;
      if (pause >= 1) setTimeout(() => this.next(), pause).unref();
      else this.next();
    }
  }

  private clientsActive(): boolean {
    return this.clientsInFlight > 0 || performance.now() - this.lastClientAt < this.clientQuietMs;
  }

  private next(): void {
    const resolve = this.waiting.shift();
    if (resolve) resolve();
    else this.busy = false;
  }
}
