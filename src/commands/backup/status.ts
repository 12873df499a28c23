import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { formatBytes } from '../../cli/progress.js';
import { renderReport } from '../../cli/report.js';
import type { PlaceStatus } from '../../lib/backup/status.js';
import { LicenseServerError } from '../../lib/errors.js';

export default class BackupStatus extends BaseCommand<typeof BackupStatus> {
  static override description = `Where each place's newest good backup stands: local storage (backup.path) and every off-site target (backup.targets), each read now from the place itself: the newest backup, its age, how many, how many bytes, the newest backup not copied there yet (copying, stuck with a process that is gone, or waiting for its attempt), and the last error of copies to it.
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
    try {
      status = await backupStatus({ config, ...(db ? { db } : {}), at: new Date(), ...(maxAgeMs === undefined ? {} : { maxAgeMs }), ...(places ? { places } : {}) });
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
    const stale = status.filter((place) => place.stale);
    if (stale.length > 0) {
      const error = new LicenseServerError('BACKUP_STALE', `no good backup newer than ${this.flags['max-age']} on ${stale.map((place) => place.place).join(', ')}`);
      if (!this.jsonEnabled()) process.stderr.write(renderReport(error, false).stderr!);
      process.exitCode = error.exitCode;
    }
    return status;
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
