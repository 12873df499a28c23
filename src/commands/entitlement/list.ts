import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { listEntitlementsPage, type Entitlement } from '../../lib/licensing/entitlements.js';

export default class EntitlementList extends BaseCommand<typeof EntitlementList> {
  static override description = 'List entitlements by code.';
  static override flags = { ...pagingFlags };

  async run(): Promise<Entitlement[]> {
    const { limit, offset, cursor } = this.flags;
    const { items: entitlements, next_cursor } = await this.withDatabase((db) => listEntitlementsPage(db, { limit, offset, cursor }));
    this.say(
      formatTable(entitlements, [
        { header: 'CODE', value: (e) => e.code },
        { header: 'NAME', value: (e) => e.name },
        { header: 'ID', value: (e) => e.id },
      ]),
    );
    this.sayNextPage(next_cursor);
    return entitlements;
  }
}
