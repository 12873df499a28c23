import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatBytes, withProgress } from '../../cli/progress.js';
import type { BackupRecord } from '../../lib/backup/repository.js';
import type { CopyOutcome } from '../../lib/backup/targets/copy.js';
import { backupView } from '../../lib/backup/view.js';
import { LicenseServerError } from '../../lib/errors.js';
import { renderReport } from '../../cli/report.js';

export default class BackupCreate extends BaseCommand<typeof BackupCreate> {
  static override description = `Create a verified backup: database, configuration (without secrets) and notification settings.
Written as .partial, fsynced, renamed, then read back whole (every chunk and checksum) before it is listed. Exit 0 only for a verified backup; one summary line. Old backups are pruned afterwards (backup.retention_days, keep_daily/weekly/monthly).
Then the backup is copied to every off-site target (backup.targets), and each copy read back and checked there. A target that fails costs nothing here: the summary line names it and why, and the command exits 16 (BACKUP_COPY_FAILED) instead of 0; the daemon retries.
Its backup.succeeded or backup.failed notifications are tried for at most 5 s before it exits; what is not delivered by then stays queued (a warning on standard error says so) and never changes the exit code.`;
  static override examples = ['<%= config.bin %> backup create', '<%= config.bin %> backup create --path /mnt/backups --json'];
  static override flags = {
    path: Flags.string({ description: 'Directory to write the backup to (default: backup.path).' }),
  };

  async run(): Promise<BackupRecord & { id: string; pruned: string[]; copies: CopyOutcome[] }> {
    const interactive = Boolean(process.stderr.isTTY) && !this.jsonEnabled();
    const record = await this.withDatabase(async (db, config) => {
      const { createBackup, unencryptedBackupWarning } = await import('../../lib/backup/create.js');
      if (!config.settings.backup.encryptionKey) this.warnLine(await unencryptedBackupWarning(db));
      const { pruneBackups } = await import('../../lib/backup/retention.js');
      const created = await withProgress(interactive, 'Backing up', (progress) =>
        createBackup({
          db,
          config,
          trigger: 'manual',
          toolVersion: this.config.version,
          context: this.operationContext(),
          directory: this.flags.path,
          onPhase: (phase, total) => progress.phase({ snapshot: 'Taking a snapshot', pack: 'Packing', verify: 'Verifying' }[phase], total),
          onProgress: (bytes) => progress.bytes(bytes),
        }),
      );
      // Retention runs only after a verified backup exists, so it can never leave none.
      const directory = this.flags.path ?? config.settings.backup.path;
      const plan = await pruneBackups({ directory, policy: config.settings.backup, context: this.operationContext(), db, databaseUrl: config.settings.database.url, key: config.settings.backup.encryptionKey });
      const copies = config.settings.backup.targets.length === 0 ? [] : await this.copyOffSite(db, config, directory, created, interactive);
      return { ...backupView(created), pruned: plan.remove.map((backup) => backup.backup_id), copies };
    });
    const pruned = record.pruned.length ? `; pruned ${record.pruned.length} old backup(s)` : '';
    const { describeCopies, copiesFailed } = await import('../../lib/backup/targets/replicate.js');
    const copied = record.copies.length ? `; ${describeCopies(record.copies)}` : '';
    this.say(`created backup ${record.id}: ${formatBytes(record.size)}, ${record.engine}, schema ${record.schema_version}, ${record.encrypted ? 'encrypted' : 'NOT encrypted'}, verified (${record.file})${pruned}${copied}`);
    const failed = copiesFailed(record.copies);
    if (failed.length > 0) {
      // The backup stands: its line (or JSON) is the output; the failed copies are the exit code.
      const error = new LicenseServerError('BACKUP_COPY_FAILED', `backup ${record.id} was made and kept here, but not copied to ${failed.map((outcome) => outcome.target).join(', ')}`);
      if (!this.jsonEnabled()) process.stderr.write(renderReport(error, false).stderr!);
      process.exitCode = error.exitCode;
    }
    return record;
  }

  private async copyOffSite(db: import('../../lib/storage/types.js').Database, config: import('../../lib/config/resolve.js').ResolvedConfig, directory: string, created: BackupRecord, interactive: boolean): Promise<CopyOutcome[]> {
    const { copyToTargets } = await import('../../lib/backup/targets/replicate.js');
    return withProgress(interactive, 'Copying off-site', () =>
      copyToTargets({ db, config, directory, record: created, context: this.operationContext() }),
    );
  }
}
