import { BaseCommand } from '../../cli/base-command.js';
import { setKeyProtection, type ProtectionReport } from '../../lib/signing-keys/protect.js';

export default class SigningKeyUnprotect extends BaseCommand<typeof SigningKeyUnprotect> {
  static override description =
    'Store every private signing key unsealed again (needs signing.key_encryption_key to open them), in one transaction.';

  async run(): Promise<ProtectionReport> {
    const report = await this.withDatabase((db, config) => setKeyProtection(db, false, this.operationContext(), { databaseUrl: config.settings.database.url }));
    this.say(`Unsealed ${report.changed.length} private key(s)${report.unchanged.length ? `; ${report.unchanged.length} already unsealed` : ''}.`);
    return report;
  }
}
