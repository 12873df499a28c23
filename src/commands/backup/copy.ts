import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { withProgress } from '../../cli/progress.js';
import { renderReport } from '../../cli/report.js';
import type { CopyOutcome } from '../../lib/backup/targets/copy.js';
import { LicenseServerError } from '../../lib/errors.js';

export default class BackupCopy extends BaseCommand<typeof BackupCopy> {
  static override description = `Copy a backup to off-site targets (backup.targets), or, with --missing, every local backup a target lacks, oldest first (the catch-up after an outage).
Each copy is read back from the target and checked (size and SHA-256) before its index is written there; a backup already there is not sent again. Exits 16 (BACKUP_COPY_FAILED) when a copy failed; the table names each target and why.`;
  static override examples = [
    '<%= config.bin %> backup copy 20261122T101500123Z-3f9a1c --to offsite',
    '<%= config.bin %> backup copy --missing',
    '<%= config.bin %> backup copy --missing --to vault',
  ];
  static override args = { backup: Args.string({ description: 'The id of a local backup (see backup list).' }) };
  static override flags = {
    to: Flags.string({ description: 'A target\'s name (repeatable; default: every target).', multiple: true }),
    missing: Flags.boolean({ description: 'Copy every local backup the targets do not hold, oldest first.', default: false }),
    path: Flags.string({ description: 'Backup directory (default: backup.path).' }),
  };

  async run(): Promise<CopyOutcome[]> {
    if ((this.args.backup === undefined) === !this.flags.missing) {
      throw new LicenseServerError('USAGE', this.flags.missing ? 'give a backup id or --missing, not both' : 'give the id of the backup to copy, or --missing');
    }
    const outcomes = await this.withDatabase(async (db, config) => {
      const { selectTargets } = await import('../../lib/backup/targets/open.js');
      const targets = selectTargets(config.settings.backup.targets, this.flags.to);
      if (targets.length === 0) throw new LicenseServerError('TARGET_NOT_CONFIGURED', 'no off-site target is configured (backup.targets)');
      const directory = this.flags.path ?? config.settings.backup.path;
      const { copyToTargets, copyMissing } = await import('../../lib/backup/targets/replicate.js');
      const options = { db, config, directory, context: this.operationContext(), only: targets.map((target) => target.name) };
      return withProgress(Boolean(process.stderr.isTTY) && !this.jsonEnabled(), 'Copying', async () => {
        if (this.flags.missing) return copyMissing(options);
        const { resolveBackup } = await import('../../lib/backup/repository.js');
        const { record } = await resolveBackup(directory, this.args.backup!);
        if (!record) throw new LicenseServerError('BACKUP_NOT_FOUND', `${this.args.backup} is not the id of a listed backup in ${directory}`);
        return copyToTargets({ ...options, record });
      });
    });
    this.say(formatTable(outcomes, [
      { header: 'TARGET', value: (o) => o.target },
      { header: 'BACKUP', value: (o) => o.backup_id },
      { header: 'RESULT', value: (o) => o.result },
      { header: 'ERROR', value: (o) => (o.error ? `${o.reason}: ${o.error}` : '') },
    ], this.flags.missing ? '(every target holds every local backup)' : '(nothing to copy)'));
    const failed = outcomes.filter((outcome) => outcome.result === 'failed' || outcome.result === 'refused-unencrypted');
    if (failed.length > 0) {
      const error = new LicenseServerError('BACKUP_COPY_FAILED', `${failed.length} cop${failed.length === 1 ? 'y' : 'ies'} failed: ${[...new Set(failed.map((outcome) => outcome.target))].join(', ')}`);
      if (!this.jsonEnabled()) process.stderr.write(renderReport(error, false).stderr!);
      process.exitCode = error.exitCode;
    }
    return outcomes;
  }
}
