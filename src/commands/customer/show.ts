import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { now } from '../../lib/context.js';
import { getCustomerSummary, type CustomerSummary } from '../../lib/licensing/usage-view.js';

export default class CustomerShow extends BaseCommand<typeof CustomerShow> {
  static override description = 'Show one customer, with its licenses, machines in use and usage summed.';
  static override args = { id: Args.string({ description: 'Customer id (UUID).', required: true }) };

  async run(): Promise<CustomerSummary> {
    const summary = await this.withDatabase((db) => getCustomerSummary(db, this.args.id, now(this.operationContext())));
    const { entitlements, ...fields } = summary;
    const usage = entitlements.map((e) => `${e.code} (used ${e.used}${e.usage_limit === null ? '' : ` of ${e.usage_limit}`})`).join(', ') || '-';
    this.say(formatRecord([...Object.entries(fields), ['entitlements', usage]]));
    return summary;
  }
}
