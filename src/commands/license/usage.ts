import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { listUsageRecords, type UsageRecord } from '../../lib/licensing/usage-view.js';
import { parseTimestamp } from '../../lib/validate.js';

export default class LicenseUsage extends BaseCommand<typeof LicenseUsage> {
  static override description = 'List the usage reports counted against a license, newest first.';
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };
  static override flags = {
    since: Flags.string({ description: 'Only reports recorded at or after this date or time.' }),
    limit: Flags.integer({ description: 'At most this many (1-1000).', default: 100 }),
  };

  async run(): Promise<UsageRecord[]> {
    const { flags } = this;
    const records = await this.withDatabase((db) =>
      listUsageRecords(db, this.args.license, { ...(flags.since === undefined ? {} : { since: parseTimestamp(flags.since, 'since') }), limit: flags.limit }),
    );
    this.say(
      formatTable(records, [
        { header: 'RECORDED', value: (r) => r.recorded_at },
        { header: 'OCCURRED', value: (r) => r.occurred_at },
        { header: 'ENTITLEMENT', value: (r) => r.entitlement_code },
        { header: 'QUANTITY', value: (r) => r.quantity },
        { header: 'REMAINING', value: (r) => r.remaining },
        { header: 'HARDWARE ID', value: (r) => r.hardware_id },
        { header: 'IDEMPOTENCY KEY', value: (r) => r.idempotency_key },
      ]),
    );
    return records;
  }
}
