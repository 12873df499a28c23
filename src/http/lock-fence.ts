import { LicenseServerError } from '../lib/errors.js';
import type { ServingState } from './serving-state.js';

/**
 * While the daemon does not hold its database lock (PostgreSQL: the lock's connection
 * ended), a restore may be replacing the data: every request but /healthz is refused with
 * 503 until the lock is held again and the database reopened, so that nothing is written
 * beside a restore, and nothing is read from before it.
 */
export class LockFence {
  refusal: LicenseServerError | undefined;
  private generation = 0;

  constructor(
    private readonly log: (entry: Record<string, unknown>) => void,
    private readonly state: () => ServingState | undefined,
  ) {}

  lost(reason: string): void {
    this.generation += 1;
    this.set(new LicenseServerError('DATABASE_UNAVAILABLE', `this daemon lost its lock on the database (${reason}); it answers again once it holds the lock`));
    this.log({ level: 'error', msg: 'lost the database lock; refusing requests until it is held again', reason });
  }

  regained(): void {
    const generation = this.generation;
    void (async () => {
      // A restore may have replaced the data (and the signing key) meanwhile.
      for (let attempt = 1; generation === this.generation; attempt += 1) {
        try {
          await this.state()?.reopen(false);
          this.set(undefined);
          this.log({ level: 'info', msg: 'holding the database lock again; serving' });
          return;
        } catch (error) {
          if (attempt === 1) this.log({ level: 'error', msg: 'cannot reopen the database after taking its lock again; retrying', error: error instanceof Error ? error.message.slice(0, 200) : String(error) });
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
    })();
  }

  private set(refusal: LicenseServerError | undefined): void {
    this.refusal = refusal;
    const state = this.state();
    if (state) state.refusal = refusal;
  }
}
