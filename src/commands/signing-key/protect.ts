import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { setKeyProtection, type ProtectionReport } from '../../lib/signing-keys/protect.js';

export default class SigningKeyProtect extends BaseCommand<typeof SigningKeyProtect> {
  static override description =
    'Seal every private signing key in the store under signing.key_encryption_key (AES-256-GCM), in one transaction. Afterwards the store signs only where that key is configured; keep it apart from the database and its backups. Refused while a running daemon of the database lacks that key, unless --force.';
  static override flags = {
    force: Flags.boolean({ description: 'Seal even though a running daemon lacks the key-encryption key: it stops signing until it is restarted with it.', default: false }),
  };

  async run(): Promise<ProtectionReport> {
    const report = await this.withDatabase((db, config) =>
      setKeyProtection(db, true, this.operationContext(), { databaseUrl: config.settings.database.url, force: this.flags.force }),
    );
    for (const daemon of report.daemons_without_key) this.warnLine(`${daemon} can no longer sign: restart it with signing.key_encryption_key set`);
    if (report.erase_warning) this.warnLine(report.erase_warning);
    this.say(`Sealed ${report.changed.length} private key(s)${report.unchanged.length ? `; ${report.unchanged.length} already sealed` : ''}.`);
    return report;
  }
}
