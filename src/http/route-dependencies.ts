import type { Settings } from '../lib/config/resolve.js';
import type { Database } from '../lib/storage/types.js';
import type { DaemonMetrics } from './metrics.js';
import type { ServingState } from './serving-state.js';

/*
 * What every route table is built from. Its own module, so that the routes and app.ts, which
 * assembles them, do not import each other.
 */

/** Holds new requests off (503 + Retry-After) while the data is replaced under them. */
export interface Maintenance {
  /** Starts refusing new requests, then waits until only `keep` requests remain in flight. */
  begin(retryAfterSeconds: number, keep: number, timeoutMs: number): Promise<void>;
  end(): void;
}

export interface RouteDependencies {
  readonly db: Database;
  readonly settings: Settings;
  readonly clock: () => Date;
  readonly state: ServingState;
  readonly maintenance: Maintenance;
  readonly toolVersion: string;
  readonly log: (entry: Record<string, unknown>) => void;
  /** The backup schedule, when the daemon runs one. */
  readonly scheduler?: { status(): Promise<unknown> };
  /** Absent only in route tables built without a daemon (the docs tests). */
  readonly metrics?: DaemonMetrics;
}
