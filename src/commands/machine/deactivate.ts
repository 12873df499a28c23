import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { formatMachine } from '../../cli/machine-output.js';
import { deactivateMachine, type MachineChange } from '../../lib/licensing/machines.js';

export default class MachineDeactivate extends BaseCommand<typeof MachineDeactivate> {
  static override description = 'Deactivate a machine: its online validations are refused and its seat is freed (once no offline file or grace token of it is still valid).';
  static override args = { id: Args.string({ description: 'Machine id (UUID), from `machine list`.', required: true }) };

  async run(): Promise<MachineChange> {
    const change = await this.withDatabase((db) => deactivateMachine(db, this.args.id, this.operationContext()));
    for (const warning of change.warnings) this.warnLine(warning);
    this.say(formatMachine(change.machine));
    return change;
  }
}
