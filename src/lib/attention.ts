import { ATTENTION_LISTS, countSome, type AttentionList, type AttentionListName } from './attention-counts.js';
import type { ListCount } from './paging.js';
import { backupFigures, copyFigures } from './metrics/store-figures.js';
import { findSigningKey } from './signing-keys/keys.js';
import type { Database } from './storage/types.js';

/**
 * What needs an operator now (GET /api/attention, the console's home page): counts of the
 * records to look at, each with the API query that lists exactly them, plus the state of
 * backups and the age of the signing key. Everything is read at `at` from the store, by the
 * same queries as /metrics' store figures (metrics/store-figures.ts), so the two agree.
 */
export interface Attention {
  readonly at: string;
  readonly counts: Readonly<Record<AttentionListName | 'backup_targets_failing', AttentionCount>>;
  readonly backups: BackupAttention;
  /** Null before the first key exists. */
  readonly signing_key: SigningKeyAttention | null;
}

export interface AttentionCount extends ListCount {
  readonly query: string;
  /** When it was counted: the request's time, or the start of the background read it comes from. */
  readonly as_of: string;
}

export interface BackupAttention {
  /** No good manual or scheduled backup newer than max_age_seconds. */
  readonly stale: boolean;
  /** The newest good manual or scheduled backup's start, from the audit log (as /metrics). */
  readonly newest_success_at: string | null;
  /** backup.max_age, or 26 hours without one (as the LicenseServerBackupStale alert rule). */
  readonly max_age_seconds: number;
  readonly query: string;
}

export interface SigningKeyAttention {
  readonly key_id: string;
  readonly created_at: string;
  readonly age_seconds: number;
  readonly query: string;
}

export interface AttentionOptions {
  readonly at: Date;
  /** Configured off-site targets (backup.targets) by name. */
  readonly targets: readonly string[];
  readonly backupMaxAgeMs?: number;
  /**
   * A daemon's fresh background read of the store's figures (the one /metrics shows), for the
   * counts that scan (AttentionList.scans): without it they are counted now.
   */
  readonly background?: { readonly at: Date; readonly counts: Readonly<Record<AttentionListName, number>> };
}

const BACKUP_STATUS = '/api/backups/status';

/** docs/prometheus-alerts.yml takes this when a daemon has no backup.max_age. */
export const DEFAULT_BACKUP_MAX_AGE_MS = 26 * 3_600_000;

export async function readAttention(db: Database, options: AttentionOptions): Promise<Attention> {
  const { at } = options;
  const names = Object.keys(ATTENTION_LISTS) as AttentionListName[];
  const fromBackground = (name: AttentionListName) => options.background !== undefined && (ATTENTION_LISTS[name] as AttentionList).scans === true;
  const lists = await countSome(db, at, names.filter((name) => !fromBackground(name)));
  const counts: Partial<Record<AttentionListName | 'backup_targets_failing', AttentionCount>> = {};
  for (const name of names) {
    const { query } = ATTENTION_LISTS[name];
    counts[name] = fromBackground(name)
      ? { count: options.background!.counts[name], exact: true, query, as_of: options.background!.at.toISOString() }
      : { ...lists[name]!, query, as_of: at.toISOString() };
  }
  // A target is failing while copies to it that are not made yet failed at their last attempt
  // (license_server_store_backup_copy_last_failure_timestamp_seconds is present).
  const copies = await copyFigures(db, options.targets);
  counts.backup_targets_failing = { count: [...copies.values()].filter((figures) => figures.lastFailure !== undefined).length, exact: true, query: BACKUP_STATUS, as_of: at.toISOString() };
  const backups = await backupFigures(db);
  const newest = Math.max(backups.manual.lastSuccess ?? -Infinity, backups.scheduled.lastSuccess ?? -Infinity);
  const newestMs = Number.isFinite(newest) ? newest * 1000 : undefined;
  const maxAgeMs = options.backupMaxAgeMs ?? DEFAULT_BACKUP_MAX_AGE_MS;
  const key = await findSigningKey(db);
  return {
    at: at.toISOString(),
    counts: counts as Attention['counts'],
    backups: {
      stale: newestMs === undefined || at.getTime() - newestMs > maxAgeMs,
      newest_success_at: newestMs === undefined ? null : new Date(newestMs).toISOString(),
      max_age_seconds: maxAgeMs / 1000,
      query: BACKUP_STATUS,
    },
    signing_key: key ? {
      key_id: key.key_id,
      created_at: key.created_at,
      age_seconds: Math.max(0, Math.floor((at.getTime() - Date.parse(key.created_at)) / 1000)),
      query: '/api/signing-keys',
    } : null,
  };
}
