import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { withProgress } from '../../cli/progress.js';
import type { BackupValidation } from '../../lib/backup/validate.js';
import { backupView } from '../../lib/backup/view.js';
import type { ResolvedConfig } from '../../lib/config/resolve.js';
import { withTarget } from '../../cli/targets.js';

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
    const { validateBackup } = await import('../../lib/backup/validate.js');
    const { isPostgresUrl } = await import('../../lib/storage/open.js');
    const url = config.settings.database.url;
    const fetched = this.flags.target === undefined ? undefined : await this.download(config, this.flags.target);
    try {
      return await this.validate(config, fetched?.file ?? this.args.backup, validateBackup, isPostgresUrl(url));
    } finally {
      if (fetched) await (await import('node:fs/promises')).rm(fetched.directory, { recursive: true, force: true });
    }
  }

  /** The target's copy, downloaded into a directory of its own under the system's temporary directory. */
  private async download(config: ResolvedConfig, name: string): Promise<{ directory: string; file: string }> {
    const [{ mkdtemp, rm }, { tmpdir }, path, { fetchBackup }] = await Promise.all([
      import('node:fs/promises'), import('node:os'), import('node:path'), import('../../lib/backup/targets/copy.js'),
    ]);
    const directory = await mkdtemp(path.join(tmpdir(), 'license-server-validate-'));
    try {
      const record = await withProgress(Boolean(process.stderr.isTTY) && !this.jsonEnabled(), `Downloading from ${name}`, (progress) =>
        withTarget(config, name, (target) => fetchBackup(target, this.args.backup, directory, { onProgress: (bytes) => progress.bytes(bytes) })),
      );
      return { directory, file: path.join(directory, record.file) };
    } catch (error) {
      await rm(directory, { recursive: true, force: true });
      throw error;
    }
  }

  private async validate(config: ResolvedConfig, reference: string, validateBackup: typeof import('../../lib/backup/validate.js').validateBackup, postgres: boolean): Promise<BackupValidation & { valid: true; id: string }> {
    const url = config.settings.database.url;
    const report = await withProgress(Boolean(process.stderr.isTTY) && !this.jsonEnabled(), 'Validating', (progress) =>
      validateBackup({
        directory: this.flags.path ?? config.settings.backup.path,
        reference,
        key: config.settings.backup.encryptionKey,
        scratchDatabaseUrl: postgres ? url : undefined,
        databaseUrl: url,
        onProgress: (bytes) => progress.bytes(bytes),
      }),
    );
    this.say(`backup ${report.backup_id} is valid`);
    this.say(formatRecord(report.checks.map((check) => [check.check, check.detail] as const)));
    return { valid: true, ...backupView(report) };
  }
}
