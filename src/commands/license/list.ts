import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { LICENSE_TYPES, listLicensesPage, type License } from '../../lib/licensing/licenses.js';

export default class LicenseList extends BaseCommand<typeof LicenseList> {
  static override description = 'List licenses, oldest first.';
  static override flags = {
    customer: Flags.string({ description: 'Only licenses of this customer id.' }),
    active: Flags.boolean({ description: 'Only active licenses (--no-active: only inactive ones).', allowNo: true }),
    type: Flags.string({ description: 'Only licenses of this type.', options: [...LICENSE_TYPES] }),
    ...pagingFlags,
  };

  async run(): Promise<License[]> {
    const { customer, active, type, limit, offset, cursor } = this.flags;
    const { items: licenses, next_cursor } = await this.withDatabase((db) => listLicensesPage(db, { customerId: customer, active, type, limit, offset, cursor }));
    this.say(
      formatTable(licenses, [
        { header: 'ID', value: (l) => l.id },
        { header: 'KEY', value: (l) => `${l.key_prefix}...` },
        { header: 'CUSTOMER', value: (l) => l.customer_name },
        { header: 'TYPE', value: (l) => l.type },
        { header: 'ACTIVE', value: (l) => l.active },
        { header: 'VALID UNTIL', value: (l) => l.valid_until },
        { header: 'ENTITLEMENTS', value: (l) => l.entitlements.map((e) => e.code).join(',') || '-' },
      ]),
    );
    this.sayNextPage(next_cursor);
    return licenses;
  }
}
