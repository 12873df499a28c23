import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { createEntitlement, type Entitlement } from '../../lib/licensing/entitlements.js';

export default class EntitlementCreate extends BaseCommand<typeof EntitlementCreate> {
  static override description = `Create an entitlement: a licensed feature that licenses can grant.
On a terminal it shows the new record; otherwise it prints the new entitlement's id alone. --json gives the whole record.`;
  static override examples = ['<%= config.bin %> entitlement create --code reports.export --name "Export reports"'];
  static override flags = {
    code: Flags.string({ description: 'Unique code: letters, digits, "_", "." or "-" (max 64).' }),
    name: Flags.string({ description: 'Display name.' }),
  };

  async run(): Promise<Entitlement> {
    const code = await this.ask(this.flags.code, 'code', 'Entitlement code:');
    const name = await this.ask(this.flags.name, 'name', 'Display name:');
    const entitlement = await this.withDatabase((db) => createEntitlement(db, { code, name }, this.operationContext()));
    this.sayCreated(formatRecord([['Created entitlement', entitlement.code], ['id', entitlement.id], ['name', entitlement.name]]), entitlement.id);
    return entitlement;
  }
}
