import { LicenseServerError } from '../errors.js';

/**
 * What a probe write asks the store for: about as much as a burst of requests' transactions
 * writes (a SQLite transaction appends a few 4 KiB pages to the WAL; a PostgreSQL one fills
 * or adds a few 8 KiB pages), so that a disk with room for one tiny write only is not taken
 * for a disk with room.
 */
export const PROBE_BYTES = 64 * 1024;

/** Between two probe writes: /readyz may be asked far more often (it needs no token). */
const PROBE_INTERVAL_MS = 1000;

export function isDiskFull(error: unknown): error is LicenseServerError {
  return error instanceof LicenseServerError && error.code === 'DATABASE_DISK_FULL';
}

function isUnavailable(error: unknown): boolean {
  return error instanceof LicenseServerError && error.code === 'DATABASE_UNAVAILABLE';
}

/**
 * Whether a store takes writes, as far as this process knows: what /readyz reports besides
 * the database answering (docs/http-api.md, "GET /readyz").
 *
 * Nothing is written to find out while no write has failed, so a healthy daemon's readiness
 * probes cost it no write. Once a write was refused for want of space (DATABASE_DISK_FULL),
 * the refusal stands until a probe write of PROBE_BYTES goes through, made when readiness
 * is asked, at most once per PROBE_INTERVAL_MS. A time window instead would flap: a daemon
 * taken out of service gets no writes that could fail again, turns ready when the window
 * ends, is sent traffic, and fails it. Waiting for a real write to succeed instead would
 * never end, for the same reason.
 */
export class WriteRefusals {
  private refusal: LicenseServerError | undefined;
  private probing: Promise<void> | undefined;
  private probedAt = -Infinity;

  constructor(
    /** Writes PROBE_BYTES where the store's writes go and throws them away; DATABASE_DISK_FULL when there is no room. */
    private readonly probe: () => Promise<void>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Remembers `error` when it is a write refused for want of space; returns it as it is. */
  note<E>(error: E): E {
    if (isDiskFull(error)) this.refusal = error;
    return error;
  }

  /** Resolves while writes are taken; rejects with the refusal while it stands. */
  check(): Promise<void> {
    if (!this.refusal) return Promise.resolve();
    if (this.probing) return this.probing;
    if (this.now() - this.probedAt < PROBE_INTERVAL_MS) return Promise.reject(this.refusal);
    this.probedAt = this.now();
    this.probing = this.probe()
      .then(
        () => {
          this.refusal = undefined;
        },
        (error: unknown) => {
          // A store still full, or that cannot be reached, keeps the daemon unready. Any other
          // failure (a role that may not make a temporary table, say) says nothing of the
          // space: the refusal is forgotten, and the next refused write notes it again.
          if (isDiskFull(this.note(error)) || isUnavailable(error)) throw error;
          this.refusal = undefined;
        },
      )
      .finally(() => {
        this.probing = undefined;
      });
    return this.probing;
  }
}
