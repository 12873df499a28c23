import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { listCustomersPage, type Customer } from '../../lib/customers.js';
import { pagingFlags } from '../../cli/flags.js';

export default class CustomerList extends BaseCommand<typeof CustomerList> {
  static override description = 'List customers, oldest first.';
  static override flags = {
    active: Flags.boolean({ description: 'Only active customers (--no-active: only inactive ones).', allowNo: true }),
    ...pagingFlags,
  };

  async run(): Promise<Customer[]> {
    const { active, limit, offset, cursor } = this.flags;
    const { items: customers, next_cursor } = await this.withDatabase((db) => listCustomersPage(db, { active, limit, offset, cursor }));
    this.say(
      formatTable(customers, [
        { header: 'ID', value: (c) => c.id },
        { header: 'NAME', value: (c) => c.name },
        { header: 'ACTIVE', value: (c) => c.active },
        { header: 'EMAIL', value: (c) => c.email ?? '-' },
        { header: 'CREATED', value: (c) => c.created_at },
      ]),
    );
    this.sayNextPage(next_cursor);
    return customers;
  }
}
