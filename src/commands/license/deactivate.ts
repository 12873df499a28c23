import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { setLicenseActive, type License } from '../../lib/licensing/licenses.js';

export default class LicenseDeactivate extends BaseCommand<typeof LicenseDeactivate> {
  static override description = 'Deactivate a license: it can no longer be checked out or validated.';
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };

  async run(): Promise<License> {
    const license = await this.withDatabase((db) => setLicenseActive(db, this.args.license, false, this.operationContext()));
    this.say(`License ${license.id} is ${license.active ? 'active' : 'inactive'}.`);
    return license;
  }
}
