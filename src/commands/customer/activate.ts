import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { setCustomerActive, type Customer } from '../../lib/customers.js';

export default class CustomerActivate extends BaseCommand<typeof CustomerActivate> {
  static override description = 'Activate a customer.';
  static override args = { id: Args.string({ description: 'Customer id (UUID).', required: true }) };

  async run(): Promise<Customer> {
    const customer = await this.withDatabase((db) => setCustomerActive(db, this.args.id, true, this.operationContext()));
    this.say(`Customer ${customer.id} is ${customer.active ? 'active' : 'inactive'}.`);
    return customer;
  }
}
