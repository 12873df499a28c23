import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatLicense } from '../../cli/license-output.js';
import { LicenseServerError } from '../../lib/errors.js';
import { updateLicense, type LicenseChange } from '../../lib/licensing/license-changes.js';
import { parseLeaseHours, parseMaxMachines, parseMetadataPairs } from '../../lib/licensing/license-terms.js';
import { parseEntitlementGrant } from '../../lib/licensing/licenses.js';
import { BINDINGS } from '../../lib/licensing/license-terms.js';

export default class LicenseUpdate extends BaseCommand<typeof LicenseUpdate> {
  static override description = `Change a license in place: same id and key, every change audited with its before and after.
The next online validation and checkout see the change; offline files already checked out keep the window they were signed with.`;
  static override examples = [
    '<%= config.bin %> license update 0b6c4f8e-... --valid-until 2028-06-30 --max-machines 10',
    '<%= config.bin %> license update 0b6c4f8e-... --add-entitlement reports.export --set-limit api.calls:50000 --metadata crm_id=AC-1042',
  ];
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };
  static override flags = {
    'valid-until': Flags.string({ description: 'New end: YYYY-MM-DD (through that day, UTC: stored as the next day\'s 00:00:00, the end being exclusive) or RFC 3339.' }),
    'valid-from': Flags.string({ description: 'New start.' }),
    'max-machines': Flags.string({ description: 'New machine limit, or "none" to remove it.' }),
    'lease-hours': Flags.string({ description: 'Floating licenses: new lease length in hours (1-720).' }),
    floating: Flags.boolean({ description: 'Switch to floating seats (--no-floating: back to node-locked machines).', allowNo: true }),
    'add-entitlement': Flags.string({ description: 'CODE or CODE:LIMIT to grant; repeatable.', multiple: true, default: [] }),
    'remove-entitlement': Flags.string({ description: 'CODE to take away; repeatable.', multiple: true, default: [] }),
    'set-limit': Flags.string({ description: 'CODE:LIMIT (or CODE:none) for a granted entitlement; repeatable.', multiple: true, default: [] }),
    metadata: Flags.string({ description: 'KEY=VALUE to set, KEY= to remove; repeatable.', multiple: true, default: [] }),
    binding: Flags.string({ description: 'How the next offline files seal the decryption key (files already out keep theirs).', options: [...BINDINGS] }),
  };

  async run(): Promise<LicenseChange> {
    const { flags } = this;
    const maxMachines = flags['max-machines'];
    const change = await this.withDatabase((db) =>
      updateLicense(db, this.args.license, {
        ...(flags['valid-until'] === undefined ? {} : { validUntil: flags['valid-until'] }),
        ...(flags['valid-from'] === undefined ? {} : { validFrom: flags['valid-from'] }),
        ...(maxMachines === undefined ? {} : { maxMachines: maxMachines === 'none' ? null : parseMaxMachines(maxMachines) }),
        ...(flags['lease-hours'] === undefined ? {} : { leaseHours: parseLeaseHours(flags['lease-hours']) }),
        ...(flags.floating === undefined ? {} : { floating: flags.floating }),
        addEntitlements: flags['add-entitlement'].map(parseEntitlementGrant),
        removeEntitlements: flags['remove-entitlement'],
        setLimits: flags['set-limit'].map(parseLimit),
        ...(flags.metadata.length ? { metadata: parseMetadataPairs(flags.metadata) } : {}),
        ...(flags.binding === undefined ? {} : { binding: flags.binding }),
      }, this.operationContext()),
    );
    for (const warning of change.warnings) this.warnLine(warning);
    const fields = Object.keys(change.changes);
    this.say(`${fields.length ? `Changed ${fields.join(', ')}` : 'Nothing changed'}\n${formatLicense(change.license)}`);
    return change;
  }
}

function parseLimit(spec: string) {
  const grant = parseEntitlementGrant(spec.replace(/:none$/, ''));
  if (!spec.includes(':')) throw new LicenseServerError('INVALID_INPUT', `--set-limit takes CODE:LIMIT or CODE:none, got "${grant.code}"`);
  return grant;
}
