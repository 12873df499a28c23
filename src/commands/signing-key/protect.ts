import { BaseCommand } from '../../cli/base-command.js';
import { setKeyProtection, type ProtectionReport } from '../../lib/signing-keys/protect.js';

export default class SigningKeyProtect extends BaseCommand<typeof SigningKeyProtect> {
  static override description =
    'Seal every private signing key in the store under signing.key_encryption_key (AES-256-GCM), in one transaction. Afterwards the store signs only where that key is configured; keep it apart from the database and its backups.';

  async run(): Promise<ProtectionReport> {
    const report = await this.withDatabase((db) => setKeyProtection(db, true, this.operationContext()));
    this.say(`Sealed ${report.changed.length} private key(s)${report.unchanged.length ? `; ${report.unchanged.length} already sealed` : ''}.`);
    return report;
  }
}
