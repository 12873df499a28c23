import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { formatMachine } from '../../cli/machine-output.js';
import { now } from '../../lib/context.js';
import { getMachine, type Machine } from '../../lib/licensing/machines.js';

export default class MachineShow extends BaseCommand<typeof MachineShow> {
  static override description = 'Show one machine.';
  static override args = { id: Args.string({ description: 'Machine id (UUID), from `machine list`.', required: true }) };

  async run(): Promise<Machine> {
    const machine = await this.withDatabase((db) => getMachine(db, this.args.id, now(this.operationContext())));
    this.say(formatMachine(machine));
    return machine;
  }
}
