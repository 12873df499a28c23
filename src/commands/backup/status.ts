import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { formatBytes } from '../../cli/progress.js';
import { renderReport } from '../../cli/report.js';
import type { PlaceStatus } from '../../lib/backup/status.js';
import type { WalArchivingStatus } from '../../lib/backup/wal-archiving.js';
import type { ResolvedConfig } from '../../lib/config/resolve.js';
import { LicenseServerError } from '../../lib/errors.js';

export default class BackupStatus extends BaseCommand<typeof BackupStatus> {
  static override description = `Where each place's newest good backup stands: local storage (backup.path) and every off-site target (backup.targets), each read now from the place itself: the newest backup, its age, how many, how many bytes, the newest backup not copied there yet (copying, stuck with a process that is gone, or waiting for its attempt), and the last error of copies to it.
Below the table: each replica's lag as serve last recorded it (backup.replication; with its age, and whether serve still runs), and the newest restore drill. --json keeps the list of places; GET /api/backups/status has all three.
With --max-age, exits 17 (BACKUP_STALE) when any place has no good backup newer than that, or could not be read: for a cron job or a Nagios check. Works while the database is down (the last errors and the copies not made yet are then not shown).`;
  static override examples = ['<%= config.bin %> backup status', '<%= config.bin %> backup status --max-age 26h', '<%= config.bin %> backup status --place offsite --max-age 26h --json'];
  static override flags = {
    'max-age': Flags.string({ description: 'The oldest a place\'s newest good backup may be, such as 26h or 8d: older (or none, or unreadable) exits 17.' }),
    place: Flags.string({ description: 'Only this place: local, or a target\'s name (repeatable).', multiple: true }),
  };

  async run(): Promise<PlaceStatus[]> {
    const config = await this.resolveConfig();
    const [{ backupStatus }, { parseDuration }, { selectTargets }] = await Promise.all([
      import('../../lib/backup/status.js'), import('../../lib/duration.js'), import('../../lib/backup/targets/open.js'),
    ]);
    const maxAgeMs = this.flags['max-age'] === undefined ? undefined : parseDuration(this.flags['max-age'], '--max-age');
    const places = this.flags.place;
    if (places) selectTargets(config.settings.backup.targets, places.filter((place) => place !== 'local'));
    // The last errors live in the database; a store that is down must not hide the rest.
    const { openDatabase } = await import('../../lib/storage/open.js');
    const db = await openDatabase(config.settings.database.url, { migrate: false, create: false, timeouts: config.settings.database }).catch(() => undefined);
    let status: PlaceStatus[];
    let walArchiving: WalArchivingStatus | undefined;
    try {
      status = await backupStatus({ config, ...(db ? { db } : {}), at: new Date(), ...(maxAgeMs === undefined ? {} : { maxAgeMs }), ...(places ? { places } : {}) });
      if (db?.engine === 'postgres') walArchiving = await (await import('../../lib/backup/wal-archiving.js')).readWalArchiving(db);
    } finally {
      await db?.close();
    }
    this.say(formatTable(status, [
      { header: 'PLACE', value: (p) => p.place },
      { header: 'NEWEST', value: (p) => p.newest_backup_id ?? (p.unreachable ? '(unreadable)' : '(none)') },
      { header: 'AGE', value: (p) => (p.age_seconds === null ? '' : formatAge(p.age_seconds)) },
      { header: 'COUNT', value: (p) => p.count },
      { header: 'BYTES', value: (p) => formatBytes(p.bytes) },
      ...(maxAgeMs === undefined ? [] : [{ header: 'STALE', value: (p: PlaceStatus) => p.stale }]),
      { header: 'NOT COPIED YET', value: notCopiedYet },
      { header: 'LAST ERROR', value: lastError },
    ]));
    if (!this.jsonEnabled()) {
      if (walArchiving) this.sayWalArchiving(walArchiving);
      await this.sayReplicationAndDrills(config.settings);
    }
    const stale = status.filter((place) => place.stale);
    if (stale.length > 0) {
      const error = new LicenseServerError('BACKUP_STALE', `no good backup newer than ${this.flags['max-age']} on ${stale.map((place) => place.place).join(', ')}`);
      if (!this.jsonEnabled()) process.stderr.write(renderReport(error, false).stderr!);
      process.exitCode = error.exitCode;
    }
    return status;
  }

  /** PostgreSQL's own word on its WAL archiving (pg_stat_archiver), which pgBackRest does. */
  private sayWalArchiving(archiving: WalArchivingStatus): void {
    const last = archiving.last_archived_wal
      ? `last archived ${archiving.last_archived_wal} ${formatAge(archiving.last_archived_age_seconds ?? 0)} ago`
      : 'nothing archived yet';
    const waiting = archiving.waiting_segments ? `, ${archiving.waiting_segments} WAL file(s) waiting` : '';
    const failures = archiving.failed_count > 0 ? `, ${archiving.failed_count} failure(s) (last ${archiving.last_failed_at})` : '';
    this.say(`\nWAL archiving (PostgreSQL): ${archiving.state}, ${last}${waiting}${failures}, archive_timeout ${archiving.archive_timeout_seconds}s`);
    for (const line of [archiving.problem, ...archiving.warnings]) if (line) this.say(`  ${line}`);
  }

  /**
   * What serve last recorded of its replication (status-file.ts; the command runs without the
   * daemon, so it says how old that is and whether serve still runs) and the newest restore
   * drill. `GET /api/backups/status` has both as JSON; `--json` here keeps its list of places.
   */
  private async sayReplicationAndDrills(settings: ResolvedConfig['settings']): Promise<void> {
    const [{ readReplicationStatus }, { readDrillHistory }] = await Promise.all([import('../../lib/replication/status-file.js'), import('../../lib/backup/drill-history.js')]);
    const now = Date.now();
    if (settings.backup.replication) {
      const recorded = await readReplicationStatus(settings.database.url);
      if (!recorded) {
        this.say('\nReplication: configured, but serve has not recorded it yet (it does once it runs)');
      } else {
        const age = formatAge(Math.max(0, Math.round((now - Date.parse(recorded.as_of)) / 1000)));
        const running = recorded.state !== 'stopped' && processRuns(recorded.serve_pid);
        this.say(`\nReplication (Litestream ${recorded.litestream_version}): ${running ? recorded.state : 'serve is not running'}, as of ${age} ago${recorded.restarts > 0 ? `, Litestream restarted ${recorded.restarts === 1 ? 'once' : `${recorded.restarts} times`}` : ''}`);
        this.say(formatTable(recorded.replicas, [
          { header: 'TARGET', value: (r) => r.target },
          { header: 'LAG', value: (r) => (r.lag_seconds === null ? 'unknown' : `${r.lag_seconds}s`) },
          { header: 'POSITION', value: (r) => r.position ?? 'unknown' },
          { header: 'ERRORS', value: (r) => r.errors },
          { header: 'LAST ERROR', value: (r) => (r.last_error ? `${r.last_error.at} ${r.last_error.message}` : '') },
        ]));
      }
    }
    const [newest] = await readDrillHistory(settings.backup.path);
    if (newest) {
      const age = formatAge(Math.max(0, Math.round((now - Date.parse(newest.finished_at)) / 1000)));
      const failed = newest.parts.find((part) => !part.ok);
      this.say(`\nLast restore drill: ${newest.ok ? 'passed' : 'FAILED'} at ${newest.finished_at} (${age} ago, ${newest.trigger})${failed?.error ? `: ${failed.source} ${failed.name}: ${failed.error.code} ${failed.error.message}` : ''}`);
    } else if (settings.backup.drill.enabled) {
      this.say('\nLast restore drill: none yet (`backup drill`, or serve on backup.drill.schedule)');
    }
  }
}

/** Whether a process with this pid runs here (a pid reused since is taken for serve: the age says how old the status is). */
function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The newest backup on its way to a target and how its copy stands, so that the target's
 * NEWEST is never read as all there is: `<id> copying`, `<id> stuck` (its process is gone: the
 * daemon's next round or `backup copy --missing` takes it over), `<id> waiting (next try <time>)`.
 */
function notCopiedYet(place: PlaceStatus): string {
  const newest = place.copies?.newest;
  if (!newest) return '';
  const retry = newest.state === 'waiting' && newest.attempts > 0 && newest.next_attempt_at ? ` (next try ${newest.next_attempt_at})` : '';
  const more = place.copies!.pending > 1 ? ` (+${place.copies!.pending - 1} older)` : '';
  return `${newest.backup_id} ${newest.state}${retry}${more}`;
}

/** What failed at the place, after its reason as the summary line puts it: `unreachable: target offsite: ...`. */
function lastError(place: PlaceStatus): string {
  const [reason, text] = place.unreachable !== null ? [place.unreachable_reason, place.unreachable] : [place.last_error_reason, place.last_error];
  if (text === null) return '';
  return reason === null ? text : `${reason}: ${text}`;
}

/** 26h 5m, 3d 2h: enough to compare with a --max-age at a glance. */
function formatAge(seconds: number): string {
  const days = Math.floor(seconds / 86_400);
  const hours = Math.floor((seconds % 86_400) / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  if (days > 0) return `${days}d ${hours}h`;
  if (hours > 0) return `${hours}h ${minutes}m`;
  return `${minutes}m ${seconds % 60}s`;
}
