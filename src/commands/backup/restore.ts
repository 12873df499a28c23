import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { withProgress } from '../../cli/progress.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { RestoreReport } from '../../lib/backup/restore.js';
import type { RestorePreview } from '../../lib/backup/restore-preview.js';
import { anotherServerWarning, previewLines, reportLines, type OutputLine } from '../../cli/restore-output.js';
import type { ResolvedConfig } from '../../lib/config/resolve.js';
import type { ConfigurationSource, ReplicaMoment } from '../../lib/replication/point-in-time.js';

export default class BackupRestore extends BaseCommand<typeof BackupRestore> {
  static override description = `Restore a backup: database, configuration and notification settings.
Validates the backup first and takes a pre-restore backup of the current state. SQLite is swapped atomically; PostgreSQL is replaced in one transaction. A backup of the other engine is converted (SQLite to PostgreSQL and back): database.url decides where the data goes. Refuses while a daemon uses the database (restore through its API instead). Asks for confirmation on a terminal; scripts pass --yes.
Revocations made after the backup survive it: admin tokens revoked in the replaced database stay revoked, always; licenses, customers and machines deactivated there stay deactivated unless --no-keep-revocations. Signing keys never move back: a key retired after the backup stays retired, one made after it is carried over. A backup of another server (no signing key in common) replaces this server's signing keys and admin tokens, and only with --replace-keys (--yes never covers it); the question, the refusal without --yes and --dry-run say so. --dry-run rehearses the restore, failing where it would. The report lists all of it.`;
  static override examples = [
    '<%= config.bin %> backup restore 20261122T101500123Z-3f9a1c',
    '<%= config.bin %> backup restore /mnt/usb/20261122T101500123Z-3f9a1c.backup.tar.gz.enc --yes',
    '<%= config.bin %> backup restore 20261122T101500123Z-3f9a1c --target offsite --yes',
    '<%= config.bin %> backup restore --to-time 2026-11-29T14:03:00Z --target offsite --dry-run',
  ];
  static override args = { backup: Args.string({ description: 'Backup id, or the path of a backup file (e.g. copied to a new host). Not with --to-time.', required: false }) };
  static override flags = {
    yes: Flags.boolean({ description: 'Restore without asking. Never covers another server\'s signing keys and admin tokens: see --replace-keys.', default: false }),
    'replace-keys': Flags.boolean({
      description: 'Let a backup of another server (one that shares no signing key with this one) replace this server\'s signing keys and admin tokens. Without it such a restore is refused (RESTORE_KEYS_NOT_CONFIRMED), --yes or not; on a terminal it is asked separately.',
      default: false,
    }),
    path: Flags.string({ description: 'Backup directory (default: backup.path).' }),
    target: Flags.string({ description: 'Restore from this off-site target (backup.targets): the backup is downloaded into a staging area under the backup directory, checked against the target\'s index, and listed as a local backup only once it is restored. An unencrypted one is refused unless the target says allow_unencrypted: true. Needs only the configuration, the backup key and the target\'s credentials: for a fresh host.' }),
    'keep-revocations': Flags.boolean({
      description: 'Keep licenses and customers that were deactivated after the backup deactivated (the default); --no-keep-revocations restores them as the backup has them. Revoked admin tokens stay revoked either way.',
      default: true,
      allowNo: true,
    }),
    'dry-run': Flags.boolean({
      description: 'Rehearse the restore, changing nothing: read and check the whole backup as the restore would (the key, every chunk and checksum, the schema; from a target, the download), failing where it would, and say what it would do to the signing keys (and whether the backup is another server\'s, whose keys and admin tokens would replace this server\'s).',
      default: false,
    }),
    force: Flags.boolean({
      description: 'Restore into a PostgreSQL database that also holds tables that are not license-server\'s (they are left as they are).',
      default: false,
    }),
    'to-time': Flags.string({
      description: 'SQLite with backup.replication: restore the replica on --target as it was at this moment (RFC 3339, such as 2026-11-29T14:03:00Z): its newest snapshot before then, replayed to the last write before then, restored into a scratch directory (never backup.path) and then restored as any backup, with the same checks, pre-restore backup and confirmations. --dry-run says which snapshot and which moment the state is from.',
    }),
  };

  async run(): Promise<RestoreReport | RestorePreview | (RestoreReport & { replica: ReplicaMoment }) | (RestorePreview & { replica: ReplicaMoment })> {
    const config = await this.resolveConfig();
    if (this.flags['to-time'] !== undefined) return this.restoreToTime(config, this.flags['to-time']);
    if (this.args.backup === undefined) throw new LicenseServerError('USAGE', 'give the id or path of the backup to restore, or --to-time with --target to restore a replica');
    return this.restoreArchive({ config, reference: this.args.backup, directory: this.flags.path, target: this.flags.target });
  }

  /** --to-time: the replica's state at that moment, packed as an archive in a scratch directory and restored as one. */
  private async restoreToTime(config: ResolvedConfig, text: string) {
    if (this.args.backup !== undefined) throw new LicenseServerError('USAGE', '--to-time restores a replica: give --target, not a backup');
    if ((await import('../../lib/storage/open.js')).isPostgresUrl(config.settings.database.url)) {
      throw new LicenseServerError('USAGE', '--to-time restores a SQLite replica; a PostgreSQL store is restored to a time by pgBackRest, from its archived WAL (docs/replication.md, "PostgreSQL")');
    }
    if (this.flags.target === undefined) throw new LicenseServerError('USAGE', '--to-time needs --target, the replicated target to restore from');
    const [{ parseTimestamp }, { replicaArchiveAt }] = await Promise.all([import('../../lib/validate.js'), import('../../lib/replication/point-in-time.js')]);
    const toTime = parseTimestamp(text, '--to-time');
    const replica = await replicaArchiveAt({ config, target: this.flags.target, toTime, toolVersion: this.config.version, context: this.operationContext(), environment: process.env });
    try {
      this.say(`replica on ${replica.moment.target} at ${replica.moment.to_time}: snapshot ${replica.moment.generation}/${replica.moment.snapshot.index} of ${replica.moment.snapshot.created_at}, replayed to the state of ${replica.moment.state_at} (it can restore to ${replica.moment.available.from} through ${replica.moment.available.to}); ${configurationText(replica.configuration)}`);
      const result = await this.restoreArchive({ config, reference: replica.archive, directory: undefined, target: undefined });
      return { ...result, replica: replica.moment, configuration: replica.configuration };
    } finally {
      await replica.dispose();
    }
  }

  private async restoreArchive(where: { config: ResolvedConfig; reference: string; directory: string | undefined; target: string | undefined }): Promise<RestoreReport | RestorePreview> {
    const interactive = Boolean(process.stderr.isTTY) && !this.jsonEnabled();
    const phases = { download: `Downloading from ${this.flags.target}`, validate: 'Validating the backup', convert: 'Converting it for this database engine', 'safety-backup': 'Backing up the current state', restore: 'Restoring' };
    if (this.flags['dry-run']) {
      const { previewRestore } = await import('../../lib/backup/restore-preview.js');
      const preview = await withProgress(interactive, 'Checking the backup', (progress) =>
        previewRestore({ ...where, onPhase: (phase, total) => progress.phase(phases[phase], total), onProgress: (bytes) => progress.bytes(bytes) }),
      );
      this.show(previewLines(preview));
      return preview;
    }
    let replaceKeys = this.flags['replace-keys'];
    if (!this.flags.yes) {
      const { describeRestore } = await import('../../lib/backup/restore-preview.js');
      replaceKeys = await this.confirm(await describeRestore(where), replaceKeys, where.reference);
    }
    const { restoreBackup } = await import('../../lib/backup/restore.js');
    // The restored store's rules send its backup.restored.
    const report = await this.delivering(() => withProgress(interactive, 'Restoring', (progress) =>
      restoreBackup({
        ...where,
        toolVersion: this.config.version,
        context: this.operationContext(),
        keepRevocations: this.flags['keep-revocations'],
        force: this.flags.force,
        replaceKeys,
        onPhase: (phase, total) => progress.phase(phases[phase], total),
        onProgress: (bytes) => progress.bytes(bytes),
      }),
    ));
    this.show(reportLines(report));
    if (report.pre_restore_backup_id) await this.copySafetyBackup(report.pre_restore_backup_id);
    return report;
  }

  /**
   * The safety backup of the replaced data goes off-site like any other. Its copy failing
   * does not undo or fail the restore: a warning says so, and the next copy run catches up.
   */
  private async copySafetyBackup(id: string): Promise<void> {
    const outcomes = await this.withDatabase(async (db, config) => {
      if (config.settings.backup.targets.length === 0) return [];
      const [{ copyToTargets }, { resolveBackup }] = await Promise.all([import('../../lib/backup/targets/replicate.js'), import('../../lib/backup/repository.js')]);
      const directory = this.flags.path ?? config.settings.backup.path;
      const { record } = await resolveBackup(directory, id);
      return copyToTargets({ db, config, directory, record: record!, context: this.operationContext() });
    });
    if (outcomes.length === 0) return;
    const { describeCopies, copiesFailed } = await import('../../lib/backup/targets/replicate.js');
    const line = `pre-restore backup ${id}: ${describeCopies(outcomes)}`;
    if (copiesFailed(outcomes).length > 0) this.warnLine(`${line}; \`backup copy --missing\` or the daemon copies it later`);
    else this.say(line);
  }

  private show(lines: readonly OutputLine[]): void {
    for (const line of lines) {
      if (line.warning) this.warnLine(line.text);
      else this.say(line.text);
    }
  }

  /**
   * Asks on a terminal; elsewhere refuses, saying what --yes would replace. Another server's
   * keys and admin tokens are asked about on their own, unless --replace-keys said so already:
   * returns whether they may be replaced.
   */
  private async confirm(preview: RestorePreview, replaceKeys: boolean, reference: string): Promise<boolean> {
    const foreign = anotherServerWarning(preview);
    if (!process.stdin.isTTY || !process.stdout.isTTY || this.jsonEnabled()) {
      throw new LicenseServerError('RESTORE_NOT_CONFIRMED', `a restore replaces the current data; without a terminal to ask on, pass --yes${foreign ? `; ${foreign}, which needs --replace-keys too` : ''}`);
    }
    const what = this.flags['to-time'] === undefined ? `backup ${reference}` : `the replica on ${this.flags.target} as it was at ${this.flags['to-time']}`;
    const question = `Replace the current data with ${what}? A pre-restore backup is taken first.${foreign ? ` Careful: ${foreign}.` : ''}`;
    const { default: inquirer } = await import('inquirer');
    const { proceed } = await inquirer.prompt([{ type: 'confirm', name: 'proceed', message: question, default: false }]);
    if (!proceed) throw new LicenseServerError('RESTORE_NOT_CONFIRMED', 'the restore was not confirmed; nothing was changed');
    if (!foreign || replaceKeys) return replaceKeys;
    const { replace } = await inquirer.prompt([{ type: 'confirm', name: 'replace', message: 'This server\'s signing keys and admin tokens are replaced by the backup\'s: files signed here stop verifying against its key set, and its tokens are the ones that work. Replace them?', default: false }]);
    if (!replace) throw new LicenseServerError('RESTORE_KEYS_NOT_CONFIRMED', 'replacing this server\'s signing keys and admin tokens was not confirmed; nothing was changed');
    return true;
  }
}

/** Where a point-in-time restore's config.yaml comes from, for its report line. */
function configurationText(source: ConfigurationSource): string {
  return source.from === 'backup'
    ? `the configuration file comes from backup ${source.backup_id} of ${source.created_at}, the nearest to that moment; notification settings are the replica's`
    : `the configuration file stays this host's (${source.reason}); notification settings are the replica's`;
}
