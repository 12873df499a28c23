import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { setCustomerActive, type Customer } from '../../lib/customers.js';

export default class CustomerDeactivate extends BaseCommand<typeof CustomerDeactivate> {
  static override description = 'Deactivate a customer: its licenses can no longer be checked out or validated.';
  static override args = { id: Args.string({ description: 'Customer id (UUID).', required: true }) };

  async run(): Promise<Customer> {
    const customer = await this.withDatabase((db) => setCustomerActive(db, this.args.id, false, this.operationContext()));
    this.say(`Customer ${customer.id} is ${customer.active ? 'active' : 'inactive'}.`);
    return customer;
  }
}
