/**
 * What the storage code tells whoever watches it (the daemon's metrics, src/http/metrics.ts),
 * without knowing who that is: storage imports no metrics library. Every method is optional
 * and must return at once; an observer that throws is a bug of the observer.
 */
export interface StorageObserver {
  /**
   * SQLite kept a statement waiting for another process's lock for the whole busy timeout
   * (its own retries, inside SQLite) and gave up: the caller gets DATABASE_UNAVAILABLE.
   */
  sqliteBusy?(): void;
}

/** Connections of a PostgreSQL pool, read when asked (at a scrape). */
export interface PoolStats {
  /** Connections open, idle or lent out. */
  readonly total: number;
  /** Connections lent out to a statement or transaction now. */
  readonly inUse: number;
  /** Callers waiting for a connection because every one is lent out. */
  readonly waiting: number;
}

/** Whether `error` is SQLite's lock wait running out (sqlite.ts translates it to DATABASE_UNAVAILABLE). */
export function isSqliteBusy(error: unknown): boolean {
  const code = (error as { cause?: { code?: unknown } } | null)?.cause?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}
