import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { updateCustomer, type Customer } from '../../lib/customers.js';

export default class CustomerUpdate extends BaseCommand<typeof CustomerUpdate> {
  static override description = `Change a customer's name or contact email.
The contact email is where alert rules with \`email: customer\` send that customer's notifications (expiring-soon reminders); --email "" removes it.`;
  static override examples = ['<%= config.bin %> customer update 0b6c4f8e-... --email billing@acme.example', '<%= config.bin %> customer update 0b6c4f8e-... --email ""'];
  static override args = { id: Args.string({ description: 'Customer id (UUID).', required: true }) };
  static override flags = {
    name: Flags.string({ description: 'New name.' }),
    email: Flags.string({ description: 'New contact email (one plain address), or "" to remove it.' }),
  };

  async run(): Promise<Customer> {
    const { name, email } = this.flags;
    const customer = await this.withDatabase((db) =>
      updateCustomer(db, this.args.id, { ...(name === undefined ? {} : { name }), ...(email === undefined ? {} : { email }) }, this.operationContext()),
    );
    this.say(formatRecord([['Customer', customer.id], ['name', customer.name], ['active', customer.active], ['email', customer.email ?? '-'], ['updated', customer.updated_at]]));
    return customer;
  }
}
