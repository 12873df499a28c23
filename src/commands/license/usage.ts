import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { listUsageRecordsPage, type UsageRecord } from '../../lib/licensing/usage-view.js';
import { parseTimestamp } from '../../lib/validate.js';

export default class LicenseUsage extends BaseCommand<typeof LicenseUsage> {
  static override description = 'List the usage reports counted against a license, newest first.';
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };
  static override flags = {
    since: Flags.string({ description: 'Only reports recorded at or after this date or time.' }),
    ...pagingFlags,
  };

  async run(): Promise<UsageRecord[]> {
    const { flags } = this;
    const { items: records, next_cursor } = await this.withDatabase((db) =>
      listUsageRecordsPage(db, this.args.license, {
        ...(flags.since === undefined ? {} : { since: parseTimestamp(flags.since, 'since') }),
        limit: flags.limit,
        offset: flags.offset,
        cursor: flags.cursor,
      }),
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
    this.sayNextPage(next_cursor);
    return records;
  }
}
