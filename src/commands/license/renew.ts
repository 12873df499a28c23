import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatLicense } from '../../cli/license-output.js';
import { renewLicense, type LicenseChange } from '../../lib/licensing/license-changes.js';

export default class LicenseRenew extends BaseCommand<typeof LicenseRenew> {
  static override description = `Extend a subscription: same id and key. --by adds to the current end (or to now, when the license has already ended); --until sets a later end.
A deactivated license, or one of a deactivated customer, is refused: activate it first.`;
  static override examples = ['<%= config.bin %> license renew 0b6c4f8e-... --by 365d', '<%= config.bin %> license renew 0b6c4f8e-... --until 2028-12-31'];
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };
  static override flags = {
    by: Flags.string({ description: 'How much longer: 365d, 52w, 1y (365 days), 36h.', exactlyOne: ['by', 'until'] }),
    until: Flags.string({ description: 'New end: YYYY-MM-DD (through that day, UTC: stored as the next day\'s 00:00:00, the end being exclusive) or RFC 3339.', exactlyOne: ['by', 'until'] }),
  };

  async run(): Promise<LicenseChange> {
    const { flags } = this;
    const renewal = flags.by !== undefined ? { by: flags.by } : { until: flags.until! };
    const change = await this.withDatabase((db) => renewLicense(db, this.args.license, renewal, this.operationContext()));
    this.say(`Renewed until ${change.license.valid_until} (was ${String(change.changes.valid_until?.before)})\n${formatLicense(change.license)}`);
    return change;
  }
}
