import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { withProgress } from '../../cli/progress.js';
import type { BackupValidation } from '../../lib/backup/validate.js';
import { backupView } from '../../lib/backup/view.js';

export default class BackupValidate extends BaseCommand<typeof BackupValidate> {
  static override description = `Check one backup thoroughly: every chunk, every checksum, the manifest, and the database itself.
SQLite: integrity_check of the extracted snapshot. PostgreSQL: a load into a scratch database that is dropped afterwards, or, where database.url is SQLite, a conversion into a scratch SQLite file (as a restore onto this host would make) and its integrity_check. Exit 0 only when every check passes.`;
  static override args = { backup: Args.string({ description: 'Backup id, or the path of a backup file.', required: true }) };
  static override flags = { path: Flags.string({ description: 'Backup directory (default: backup.path).' }) };

  async run(): Promise<BackupValidation & { valid: true; id: string }> {
    const config = await this.resolveConfig();
    const { validateBackup } = await import('../../lib/backup/validate.js');
    const { isPostgresUrl } = await import('../../lib/storage/open.js');
    const url = config.settings.database.url;
    const report = await withProgress(Boolean(process.stderr.isTTY) && !this.jsonEnabled(), 'Validating', (progress) =>
      validateBackup({
        directory: this.flags.path ?? config.settings.backup.path,
        reference: this.args.backup,
        key: config.settings.backup.encryptionKey,
        scratchDatabaseUrl: isPostgresUrl(url) ? url : undefined,
        databaseUrl: url,
        onProgress: (bytes) => progress.bytes(bytes),
      }),
    );
    this.say(`backup ${report.backup_id} is valid`);
    this.say(formatRecord(report.checks.map((check) => [check.check, check.detail] as const)));
    return { valid: true, ...backupView(report) };
  }
}
