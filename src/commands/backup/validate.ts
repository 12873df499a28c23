import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { withProgress } from '../../cli/progress.js';
import type { BackupValidation } from '../../lib/backup/validate.js';
import { backupView } from '../../lib/backup/view.js';

export default class BackupValidate extends BaseCommand<typeof BackupValidate> {
  static override description = `Check one backup thoroughly: every chunk, every checksum, the manifest, and the database itself.
SQLite: integrity_check of the extracted snapshot. PostgreSQL: a load into a scratch database that is dropped afterwards, or, where database.url is SQLite, a conversion into a scratch SQLite file (as a restore onto this host would make) and its integrity_check. Exit 0 only when every check passes. With --target, the copy on that off-site target is downloaded first (its size and SHA-256 checked against the target's index) and validated the same way.`;
  static override args = { backup: Args.string({ description: 'Backup id, or the path of a backup file.', required: true }) };
  static override flags = {
    path: Flags.string({ description: 'Backup directory (default: backup.path).' }),
    target: Flags.string({ description: 'Validate the copy on this off-site target: download it (checked against the target\'s index) and check every byte of it.', exclusive: ['path'] }),
  };

  async run(): Promise<BackupValidation & { valid: true; id: string }> {
    const config = await this.resolveConfig();
    const interactive = Boolean(process.stderr.isTTY) && !this.jsonEnabled();
    const report = await withProgress(interactive, this.flags.target === undefined ? 'Validating' : `Validating the copy on ${this.flags.target}`, async (progress) => {
      if (this.flags.target !== undefined) {
        const { validateTargetCopy } = await import('../../lib/backup/targets/validate-copy.js');
        const onProgress = (bytes: number) => progress.bytes(bytes);
        return (await validateTargetCopy({ config, target: this.flags.target, id: this.args.backup, onDownload: onProgress, onProgress })).report;
      }
      const [{ validateBackup }, { isPostgresUrl }] = await Promise.all([import('../../lib/backup/validate.js'), import('../../lib/storage/open.js')]);
      const url = config.settings.database.url;
      return validateBackup({
        directory: this.flags.path ?? config.settings.backup.path,
        reference: this.args.backup,
        key: config.settings.backup.encryptionKey,
        scratchDatabaseUrl: isPostgresUrl(url) ? url : undefined,
        databaseUrl: url,
        onProgress: (bytes) => progress.bytes(bytes),
      });
    });
    this.say(`backup ${report.backup_id} is valid`);
    this.say(formatRecord(report.checks.map((check) => [check.check, check.detail] as const)));
    return { valid: true, ...backupView(report) };
  }
}
