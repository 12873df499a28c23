import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatLicense } from '../../cli/license-output.js';
import { now } from '../../lib/context.js';
import { getLicenseDecryptionKey } from '../../lib/licensing/licenses.js';
import { getLicenseView, type LicenseView } from '../../lib/licensing/usage-view.js';

export default class LicenseShow extends BaseCommand<typeof LicenseShow> {
  static override description = 'Show one license, found by id or by license key, with its usage, its machines in use and its newest checkouts.';
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };
  static override flags = {
    'reveal-decryption-key': Flags.boolean({
      description: 'Also print the decryption key (32 bytes as 64 lowercase hex digits; JSON: decryption_key, null without one), for encrypting what the license unlocks.',
      default: false,
    }),
  };

  async run(): Promise<LicenseView & { decryption_key?: string | null }> {
    const reveal = this.flags['reveal-decryption-key'];
    const [license, key] = await this.withDatabase(async (db) => {
      const found = await getLicenseView(db, this.args.license, now(this.operationContext()));
      return [found, reveal ? await getLicenseDecryptionKey(db, found.id) : undefined] as const;
    });
    this.say(formatLicense(license));
    if (reveal) this.say(`decryption key: ${key ? key.toString('hex') : '-'}`);
    return reveal ? { ...license, decryption_key: key ? key.toString('hex') : null } : license;
  }
}
