import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { createCustomer, type Customer } from '../../lib/customers.js';

export default class CustomerCreate extends BaseCommand<typeof CustomerCreate> {
  static override description = `Create a customer (active from the start).
On a terminal it shows the new record; otherwise it prints the new customer's id alone, so that id=$(license-server customer create --name N) works. --json gives the whole record.`;
  static override examples = ['<%= config.bin %> customer create --name "Acme GmbH" --email billing@acme.example', 'id=$(<%= config.bin %> customer create --name "Acme GmbH")'];
  static override flags = {
    name: Flags.string({ description: 'Customer name (prompted for on a terminal when missing).' }),
    email: Flags.string({ description: 'Contact email, where alert rules with `email: customer` send (one plain address).' }),
  };

  async run(): Promise<Customer> {
    const name = await this.ask(this.flags.name, 'name', 'Customer name:');
    const customer = await this.withDatabase((db) => createCustomer(db, { name, email: this.flags.email }, this.operationContext()));
    this.sayCreated(formatRecord([['Created customer', customer.id], ['name', customer.name], ['active', customer.active], ['email', customer.email ?? '-']]), customer.id);
    return customer;
  }
}
