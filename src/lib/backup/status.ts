import type { ResolvedConfig } from '../config/resolve.js';
import type { Database } from '../storage/types.js';
import { listBackups, type BackupRecord } from './repository.js';
import { listTargetBackups } from './targets/copy.js';
import { copyBacklog, lastCopyErrors, type CopyBacklog, type CopyFailure, type LastCopyError } from './targets/copies.js';
import { openTarget } from './targets/open.js';
import { describeTarget } from './targets/settings.js';
import { isTargetError, type TargetFailure } from './targets/target.js';

/**
 * Where each place's newest good backup stands (`backup status`, GET /api/backups/status):
 * local storage from its index files, each target from what the target itself lists (an
 * index whose archive is there with its size, which a copy writes only after reading the
 * archive back). What a target holds is asked of the target, never assumed from our notes:
 * a bucket emptied by hand must show as empty.
 */
export interface PlaceStatus {
  /** The place's name, as every record of the API names itself `id` (the same as `place`). */
  readonly id: string;
  /** `local`, or a target's name. */
  readonly place: string;
  readonly kind: 'local' | 'file' | 's3' | 'sftp';
  /** Safe to print: no credential. */
  readonly location: string;
  readonly newest_backup_id: string | null;
  readonly newest_created_at: string | null;
  readonly age_seconds: number | null;
  readonly count: number;
  readonly bytes: number;
  /** A target that could not be listed now: why. */
  readonly unreachable: string | null;
  /** The same as a reason, as a copy's outcome names it (target.ts TargetFailure); null when it is not a target's failure. */
  readonly unreachable_reason: TargetFailure | null;
  /** The last copy to the target that failed since its last success (backup_copies). */
  readonly last_error: string | null;
  /** Its reason: a TargetFailure, or `unencrypted`; null for an error recorded by a release before reasons were kept. */
  readonly last_error_reason: CopyFailure | null;
  readonly last_error_at: string | null;
  /**
   * A target's copies not made yet (copies.ts CopyBacklog): how many, how many a process is
   * copying now, how many are stuck with a process that is gone, and how the newest stands.
   * Null for local storage, and without the database.
   */
  readonly copies: CopyBacklog | null;
  /** With a maximum age: no good backup newer than it here (or the place could not be read). */
  readonly stale: boolean | null;
}

export interface StatusOptions {
  readonly config: ResolvedConfig;
  /** For the targets' last errors; without it they are null. */
  readonly db?: Database;
  readonly at: Date;
  readonly maxAgeMs?: number;
  /** Only these places (`local` or target names); all when undefined. */
  readonly places?: readonly string[];
}

export async function backupStatus(options: StatusOptions): Promise<PlaceStatus[]> {
  const { config, at } = options;
  const wanted = (place: string) => options.places === undefined || options.places.includes(place);
  const errors = options.db ? await lastCopyErrors(options.db).catch(() => new Map<string, LastCopyError>()) : new Map<string, LastCopyError>();
  // Without the database (or when it cannot be read) the backlog is unknown, not empty.
  const backlog = options.db ? await copyBacklog(options.db, at).catch(() => undefined) : undefined;
  const copiesOf = (target: string): CopyBacklog | null => (backlog ? (backlog.get(target) ?? NO_BACKLOG) : null);
  const places: Array<Promise<PlaceStatus>> = [];
  if (wanted('local')) {
    places.push(listBackups(config.settings.backup.path).then(
      (records) => summarise('local', 'local', config.settings.backup.path, records, null, undefined, null, at, options.maxAgeMs),
      (error: unknown) => summarise('local', 'local', config.settings.backup.path, [], error as Error, undefined, null, at, options.maxAgeMs),
    ));
  }
  for (const settings of config.settings.backup.targets) {
    if (!wanted(settings.name)) continue;
    const location = describeTarget(settings).slice(settings.name.length + 2);
    places.push((async () => {
      try {
        const target = await openTarget(settings, config.env);
        try {
          return summarise(settings.name, settings.kind, location, await listTargetBackups(target), null, errors.get(settings.name), copiesOf(settings.name), at, options.maxAgeMs);
        } finally {
          await target.close().catch(() => undefined);
        }
      } catch (error) {
        return summarise(settings.name, settings.kind, location, [], error as Error, errors.get(settings.name), copiesOf(settings.name), at, options.maxAgeMs);
      }
    })());
  }
  return Promise.all(places);
}

const NO_BACKLOG: CopyBacklog = { pending: 0, copying: 0, stuck: 0, newest: null };

function summarise(
  place: string,
  kind: PlaceStatus['kind'],
  location: string,
  records: readonly BackupRecord[],
  unreachable: Error | null,
  lastError: LastCopyError | undefined,
  copies: CopyBacklog | null,
  at: Date,
  maxAgeMs: number | undefined,
): PlaceStatus {
  const newest = records[0];
  const age = newest ? Math.max(0, Math.round((at.getTime() - Date.parse(newest.created_at)) / 1000)) : null;
  return {
    id: place,
    place,
    kind,
    location,
    newest_backup_id: newest?.backup_id ?? null,
    newest_created_at: newest?.created_at ?? null,
    age_seconds: age,
    count: records.length,
    bytes: records.reduce((sum, record) => sum + record.size, 0),
    unreachable: unreachable?.message ?? null,
    unreachable_reason: isTargetError(unreachable) ? unreachable.reason : null,
    last_error: lastError?.error ?? null,
    last_error_reason: lastError?.reason ?? null,
    last_error_at: lastError?.at ?? null,
    copies,
    stale: maxAgeMs === undefined ? null : unreachable !== null || age === null || age * 1000 > maxAgeMs,
  };
}
