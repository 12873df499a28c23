import type { Queryable } from '../storage/types.js';

/**
 * How PostgreSQL's WAL archiving (pgBackRest's `archive-push`, docs/replication.md) stands, as
 * the server itself reports it in `pg_stat_archiver`: what a host loss or a point-in-time
 * restore could recover depends on it, and PostgreSQL only logs its failures.
 */
export interface WalArchivingStatus {
  readonly state: 'off' | 'ok' | 'failing' | 'stale';
  /** What is wrong, for a person; null when state is ok. */
  readonly problem: string | null;
  /** Settings that weaken recovery though archiving works, such as an archive_timeout over 60 s. */
  readonly warnings: readonly string[];
  readonly archive_mode: string;
  /** 0 when PostgreSQL never switches WAL files on time alone. */
  readonly archive_timeout_seconds: number;
  readonly archived_count: number;
  readonly last_archived_wal: string | null;
  readonly last_archived_at: string | null;
  readonly last_archived_age_seconds: number | null;
  readonly failed_count: number;
  readonly last_failed_wal: string | null;
  readonly last_failed_at: string | null;
  /** The WAL file being written now; null on a standby. */
  readonly current_wal: string | null;
  /** Completed WAL files not archived yet: those between the last archived and the current one. */
  readonly waiting_segments: number | null;
  /** The server's clock when read, which every age here is measured against. */
  readonly as_of: string;
}

interface ArchiverRow {
  archive_mode: string;
  archive_timeout: string;
  wal_segment_size: string;
  archived_count: string | number;
  last_archived_wal: string | null;
  last_archived_time: Date | string | null;
  failed_count: string | number;
  last_failed_wal: string | null;
  last_failed_time: Date | string | null;
  current_wal: string | null;
  now: Date | string;
}

/** The longest a completed WAL file may wait for its archive before the status says stale. */
export function staleAfterSeconds(archiveTimeoutSeconds: number): number {
  return Math.max(300, 2 * archiveTimeoutSeconds);
}

/**
 * Reads pg_stat_archiver and the archiving settings. Every role may read them; nothing here
 * needs a superuser (archive_command, which does, is not read: pgBackRest's own `check`
 * tests it end to end).
 */
export async function readWalArchiving(db: Queryable): Promise<WalArchivingStatus> {
  const [row] = await db.query<ArchiverRow & Record<string, unknown>>(
    `SELECT current_setting('archive_mode') AS archive_mode,
            (SELECT setting FROM pg_settings WHERE name = 'archive_timeout') AS archive_timeout,
            (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size') AS wal_segment_size,
            a.archived_count, a.last_archived_wal, a.last_archived_time,
            a.failed_count, a.last_failed_wal, a.last_failed_time,
            CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_walfile_name(pg_current_wal_lsn()) END AS current_wal,
            now() AS now
       FROM pg_stat_archiver a`,
  );
  return walArchivingOf(row!);
}

export function walArchivingOf(row: ArchiverRow): WalArchivingStatus {
  const now = new Date(row.now);
  const at = (value: Date | string | null) => (value === null ? null : new Date(value));
  const lastArchived = at(row.last_archived_time);
  const lastFailed = at(row.last_failed_time);
  const archiveTimeout = Number(row.archive_timeout);
  const waiting = row.current_wal && row.last_archived_wal ? segmentsBetween(row.last_archived_wal, row.current_wal, Number(row.wal_segment_size)) : null;
  const ageSeconds = lastArchived ? Math.max(0, Math.round((now.getTime() - lastArchived.getTime()) / 1000)) : null;
  const warnings: string[] = [];
  if (row.archive_mode !== 'off' && (archiveTimeout === 0 || archiveTimeout > 60)) {
    warnings.push(`archive_timeout is ${archiveTimeout === 0 ? 'off' : `${archiveTimeout} s`}: a quiet server's last writes wait ${archiveTimeout === 0 ? 'until 16 MB of WAL fill a file' : 'that long'} before they are archived; set it to 60 s or less`);
  }
  let state: WalArchivingStatus['state'] = 'ok';
  let problem: string | null = null;
  if (row.archive_mode === 'off') {
    state = 'off';
    problem = 'archive_mode is off: no WAL is archived, so a lost host loses every write since the last backup, and no point in time can be restored (docs/replication.md, "PostgreSQL")';
  } else if (lastFailed && (!lastArchived || lastFailed > lastArchived)) {
    state = 'failing';
    problem = `archiving ${row.last_failed_wal} failed at ${lastFailed.toISOString()} (${Number(row.failed_count)} failure(s) since the statistics were reset); PostgreSQL's log has archive_command's error, and it retries`;
  } else if (waiting !== null && waiting > 0 && (ageSeconds === null || ageSeconds > staleAfterSeconds(archiveTimeout))) {
    state = 'stale';
    problem = `${waiting} completed WAL file(s) wait to be archived, and the last was archived ${ageSeconds === null ? 'never' : `${ageSeconds} s ago`}`;
  }
  return {
    state,
    problem,
    warnings,
    archive_mode: row.archive_mode,
    archive_timeout_seconds: archiveTimeout,
    archived_count: Number(row.archived_count),
    last_archived_wal: row.last_archived_wal,
    last_archived_at: lastArchived?.toISOString() ?? null,
    last_archived_age_seconds: ageSeconds,
    failed_count: Number(row.failed_count),
    last_failed_wal: row.last_failed_wal,
    last_failed_at: lastFailed?.toISOString() ?? null,
    current_wal: row.current_wal,
    waiting_segments: waiting,
    as_of: now.toISOString(),
  };
}

/**
 * WAL files strictly between two names (TTTTTTTTXXXXXXXXYYYYYYYY: timeline, then the
 * segment number split in a high part and a low part of 2^32 / segment size files). A
 * backup label as the last archived file (`<segment>.<offset>.backup`) counts by the segment
 * it names; a timeline history file (`TTTTTTTT.history`, archived first after a promotion)
 * names none: null. Files of another timeline count by their numbers alone.
 */
export function segmentsBetween(lastArchived: string, current: string, segmentSize: number): number | null {
  const number = (name: string) => {
    const match = /^[0-9A-F]{8}([0-9A-F]{8})([0-9A-F]{8})/.exec(name);
    if (!match) return undefined;
    return Number.parseInt(match[1]!, 16) * (0x1_0000_0000 / segmentSize) + Number.parseInt(match[2]!, 16);
  };
  const [from, to] = [number(lastArchived), number(current)];
  if (from === undefined || to === undefined) return null;
  return Math.max(0, to - from - 1);
}
