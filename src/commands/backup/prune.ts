import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';

interface PruneReport {
  dry_run: boolean;
  removed: string[];
  kept: Array<{ backup_id: string; reasons: readonly string[] }>;
}

export default class BackupPrune extends BaseCommand<typeof BackupPrune> {
  static override description = `Delete the backups that retention no longer keeps (backup.retention_days, keep_daily, keep_weekly, keep_monthly).
The newest backup is always kept; unfinished or unverified files are never counted.`;
  static override flags = {
    'dry-run': Flags.boolean({ description: 'Only show what would be deleted.', default: false }),
    path: Flags.string({ description: 'Backup directory (default: backup.path).' }),
  };

  async run(): Promise<PruneReport> {
    const config = await this.resolveConfig();
    const { pruneBackups } = await import('../../lib/backup/retention.js');
    const dryRun = this.flags['dry-run'];
    const prune = (db?: Parameters<typeof pruneBackups>[0]['db']) =>
      pruneBackups({ directory: this.flags.path ?? config.settings.backup.path, policy: config.settings.backup, context: this.operationContext(), dryRun, db, databaseUrl: config.settings.database.url, key: config.settings.backup.encryptionKey });
    const plan = dryRun ? await prune() : await this.withDatabase((db) => prune(db));
    const report = {
      dry_run: dryRun,
      removed: plan.remove.map((backup) => backup.backup_id),
      kept: plan.keep.map(({ backup, reasons }) => ({ backup_id: backup.backup_id, reasons })),
    };
    this.say(formatTable(report.kept, [{ header: 'KEPT', value: (k) => k.backup_id }, { header: 'BECAUSE', value: (k) => k.reasons.join(', ') }], '(nothing kept)'));
    this.say(`${dryRun ? 'would delete' : 'deleted'} ${report.removed.length} backup(s)${report.removed.length ? `: ${report.removed.join(', ')}` : ''}`);
    return report;
  }
}
