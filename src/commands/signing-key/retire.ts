import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { retireSigningKey } from '../../lib/signing-keys/rotation.js';

export default class SigningKeyRetire extends BaseCommand<typeof SigningKeyRetire> {
  static override description =
    'Retire a verify-only signing key: its private key is deleted and files and grace tokens it signed stop verifying. Refused while some of them may still be valid, unless --force.';
  static override args = { key_id: Args.string({ description: 'The key id (`signing-key list`).', required: true }) };
  static override flags = {
    force: Flags.boolean({ description: 'Retire it even though files or grace tokens it signed may still be valid.', default: false }),
  };

  async run(): Promise<Awaited<ReturnType<typeof retireSigningKey>>> {
    const result = await this.withDatabase((db, config) =>
      retireSigningKey(db, this.args.key_id, { force: this.flags.force, graceHours: config.settings.grace.hours, databaseUrl: config.settings.database.url }, this.operationContext()),
    );
    if (result.forced) this.warnLine(`files or grace tokens signed by ${result.key_id} may be valid until ${result.signed_valid_until}; they no longer verify`);
    if (result.erase_warning) this.warnLine(result.erase_warning);
    this.say(`Retired signing key ${result.key_id}.`);
    return result;
  }
}
