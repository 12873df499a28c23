import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatLicense } from '../../cli/license-output.js';
import { parseLeaseHours, parseMaxMachines, parseMetadataPairs } from '../../lib/licensing/license-terms.js';
import { createLicense, LICENSE_TYPES, parseEntitlementGrant, type License } from '../../lib/licensing/licenses.js';
import { BINDINGS } from '../../lib/licensing/license-terms.js';

export default class LicenseCreate extends BaseCommand<typeof LicenseCreate> {
  static override description = `Create a license for a customer.
On a terminal it shows the new license, its key among it; otherwise it prints the new license's id alone, so that license=$(license-server license create ...) works. --json gives the whole record, key included.`;
  static override examples = [
    '<%= config.bin %> license create --customer 0b6c4f8e-... --type time_based --valid-until 2027-12-31 --entitlement reports.export --entitlement seats:25 --with-decryption-key',
    '<%= config.bin %> license create --customer 0b6c4f8e-... --type time_based --valid-until 2027-12-31 --max-machines 5 --floating --lease-hours 2',
    '<%= config.bin %> license create --customer 0b6c4f8e-... --type time_based --valid-until 2027-12-31 --with-decryption-key --binding machine-key',
  ];
  static override flags = {
    customer: Flags.string({ description: 'Customer id (UUID).', required: true }),
    type: Flags.string({ description: 'License type.', options: [...LICENSE_TYPES], required: true }),
    'valid-until': Flags.string({ description: 'End of validity: YYYY-MM-DD (through that day, UTC: stored as the next day\'s 00:00:00, the end being exclusive) or RFC 3339.', required: true }),
    'valid-from': Flags.string({ description: 'Start of validity (default: now).' }),
    entitlement: Flags.string({ description: 'CODE or CODE:LIMIT; repeat for several.', multiple: true, default: [] }),
    'with-decryption-key': Flags.boolean({ description: 'Give the license a random 32-byte decryption key.', default: false }),
    'max-machines': Flags.string({ description: 'How many machines may use it at once (default: no limit).' }),
    floating: Flags.boolean({ description: 'Seats move between machines as leases (needs --max-machines).', default: false }),
    'lease-hours': Flags.string({ description: 'Floating: hours a seat stays taken without an online validation (1-720).', default: '1' }),
    metadata: Flags.string({ description: 'KEY=VALUE for your own systems; repeat for several.', multiple: true, default: [] }),
    binding: Flags.string({
      description: 'How offline files seal the decryption key: hardware-id (to the machine\'s hardware ID; the file alone opens it) or machine-key (to the machine\'s own key from its activation request; only that machine opens it).',
      options: [...BINDINGS],
      default: 'hardware-id',
    }),
  };

  async run(): Promise<License> {
    const { flags } = this;
    const entitlements = flags.entitlement.map(parseEntitlementGrant);
    const license = await this.withDatabase((db) =>
      createLicense(
        db,
        {
          customerId: flags.customer,
          type: flags.type,
          validFrom: flags['valid-from'],
          validUntil: flags['valid-until'],
          entitlements,
          withDecryptionKey: flags['with-decryption-key'],
          ...(flags['max-machines'] === undefined ? {} : { maxMachines: parseMaxMachines(flags['max-machines']) }),
          floating: flags.floating,
          leaseHours: parseLeaseHours(flags['lease-hours']),
          metadata: parseMetadataPairs(flags.metadata),
          binding: flags.binding,
        },
        this.operationContext(),
      ),
    );
    this.sayCreated(`Created license ${license.id}\n${formatLicense(license)}`, license.id);
    return license;
  }
}
