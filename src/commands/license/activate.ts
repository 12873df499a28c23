import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { setLicenseActive, type License } from '../../lib/licensing/licenses.js';

export default class LicenseActivate extends BaseCommand<typeof LicenseActivate> {
  static override description = 'Activate a license.';
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };

  async run(): Promise<License> {
    const license = await this.withDatabase((db) => setLicenseActive(db, this.args.license, true, this.operationContext()));
    this.say(`License ${license.id} is ${license.active ? 'active' : 'inactive'}.`);
    return license;
  }
}
