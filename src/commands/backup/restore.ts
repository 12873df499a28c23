import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { withProgress } from '../../cli/progress.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { RestoreReport } from '../../lib/backup/restore.js';

export default class BackupRestore extends BaseCommand<typeof BackupRestore> {
  static override description = `Restore a backup: database, configuration and notification settings.
Validates the backup first and takes a pre-restore backup of the current state. SQLite is swapped atomically; PostgreSQL is replaced in one transaction. A backup of the other engine is converted (SQLite to PostgreSQL and back): database.url decides where the data goes. Refuses while a daemon uses the database (restore through its API instead). Asks for confirmation on a terminal; scripts pass --yes.
Revocations made after the backup survive it: admin tokens revoked in the replaced database stay revoked, always; licenses, customers and machines deactivated there stay deactivated unless --no-keep-revocations. The report lists them.`;
  static override examples = ['<%= config.bin %> backup restore 20261122T101500123Z-3f9a1c', '<%= config.bin %> backup restore /mnt/usb/20261122T101500123Z-3f9a1c.backup.tar.gz.enc --yes'];
  static override args = { backup: Args.string({ description: 'Backup id, or the path of a backup file (e.g. copied to a new host).', required: true }) };
  static override flags = {
    yes: Flags.boolean({ description: 'Restore without asking.', default: false }),
    path: Flags.string({ description: 'Backup directory (default: backup.path).' }),
    'keep-revocations': Flags.boolean({
      description: 'Keep licenses and customers that were deactivated after the backup deactivated (the default); --no-keep-revocations restores them as the backup has them. Revoked admin tokens stay revoked either way.',
      default: true,
      allowNo: true,
    }),
    force: Flags.boolean({
      description: 'Restore into a PostgreSQL database that also holds tables that are not license-server\'s (they are left as they are).',
      default: false,
    }),
  };

  async run(): Promise<RestoreReport> {
    const config = await this.resolveConfig();
    if (!this.flags.yes) await this.confirm(`Replace the current data with backup ${this.args.backup}? A pre-restore backup is taken first.`);
    const { restoreBackup } = await import('../../lib/backup/restore.js');
    const report = await withProgress(Boolean(process.stderr.isTTY) && !this.jsonEnabled(), 'Restoring', (progress) =>
      restoreBackup({
        config,
        reference: this.args.backup,
        toolVersion: this.config.version,
        context: this.operationContext(),
        directory: this.flags.path,
        keepRevocations: this.flags['keep-revocations'],
        force: this.flags.force,
        onPhase: (phase, total) => progress.phase({ validate: 'Validating the backup', convert: 'Converting it for this database engine', 'safety-backup': 'Backing up the current state', restore: 'Restoring' }[phase], total),
        onProgress: (bytes) => progress.bytes(bytes),
      }),
    );
    const migrated = report.migrated_to !== report.schema_version ? `, migrated from schema ${report.schema_version} to ${report.migrated_to}` : '';
    const safety = report.pre_restore_backup_id ? `; the previous state is backup ${report.pre_restore_backup_id}` : '';
    this.say(`restored backup ${report.backup_id} (${report.engine}${migrated})${safety}`);
    if (report.moved) {
      const rows = Object.values(report.moved.rows).reduce((sum, n) => sum + n, 0);
      this.say(`moved from ${ENGINE_NAMES[report.moved.from]} to ${ENGINE_NAMES[report.moved.to]}: ${Object.keys(report.moved.rows).length} tables, ${rows} rows; database.url is unchanged`);
    }
    if (report.signing_key_warning) this.warnLine(`${report.signing_key_warning}; set signing.key_encryption_key to the key-encryption key the backup's keys were sealed with`);
    if (report.replaced_config) this.say(`configuration restored; the replaced file is kept as ${report.replaced_config}`);
    const { admin_tokens: tokens, licenses, customers, machines, keep } = report.revocations;
    for (const token of tokens) this.say(`kept revoked: admin token "${token.name}" (${token.prefix}), revoked ${token.revoked_at}`);
    const state = keep ? 'kept deactivated' : 'active again, as in the backup (--no-keep-revocations)';
    for (const license of licenses) this.say(`${state}: license ${license.id} (${license.key_prefix})`);
    for (const customer of customers) this.say(`${state}: customer ${customer.id} (${customer.name})`);
    for (const machine of machines) this.say(`${state}: machine ${machine.id} (${machine.hardware_id}) of license ${machine.license_id}`);
    return report;
  }

  private async confirm(question: string): Promise<void> {
    if (!process.stdin.isTTY || !process.stdout.isTTY || this.jsonEnabled()) {
      throw new LicenseServerError('RESTORE_NOT_CONFIRMED', 'a restore replaces the current data; without a terminal to ask on, pass --yes');
    }
    const { default: inquirer } = await import('inquirer');
    const { proceed } = await inquirer.prompt([{ type: 'confirm', name: 'proceed', message: question, default: false }]);
    if (!proceed) throw new LicenseServerError('RESTORE_NOT_CONFIRMED', 'the restore was not confirmed; nothing was changed');
  }
}

const ENGINE_NAMES = { sqlite: 'SQLite', postgres: 'PostgreSQL' } as const;
