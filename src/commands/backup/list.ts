import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { formatBytes } from '../../cli/progress.js';
import type { BackupRecord } from '../../lib/backup/repository.js';

export default class BackupList extends BaseCommand<typeof BackupList> {
  static override description = 'List complete, verified backups, newest first. Reads only their index files: fast, and works while the database is down.';
  static override flags = {
    path: Flags.string({ description: 'Backup directory (default: backup.path).' }),
  };

  async run(): Promise<BackupRecord[]> {
    const config = await this.resolveConfig();
    const { listBackups } = await import('../../lib/backup/repository.js');
    const backups = await listBackups(this.flags.path ?? config.settings.backup.path);
    this.say(
      formatTable(backups, [
        { header: 'ID', value: (b) => b.backup_id },
        { header: 'CREATED', value: (b) => b.created_at },
        { header: 'SIZE', value: (b) => formatBytes(b.size) },
        { header: 'ENGINE', value: (b) => b.engine },
        { header: 'SCHEMA', value: (b) => b.schema_version },
        { header: 'ENCRYPTED', value: (b) => b.encrypted },
        { header: 'TRIGGER', value: (b) => b.trigger },
      ], '(no backups)'),
    );
    return backups;
  }
}
