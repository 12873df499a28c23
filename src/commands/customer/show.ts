import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { getCustomer, type Customer } from '../../lib/customers.js';

export default class CustomerShow extends BaseCommand<typeof CustomerShow> {
  static override description = 'Show one customer.';
  static override args = { id: Args.string({ description: 'Customer id (UUID).', required: true }) };

  async run(): Promise<Customer> {
    const customer = await this.withDatabase((db) => getCustomer(db, this.args.id));
    this.say(formatRecord(Object.entries(customer)));
    return customer;
  }
}
