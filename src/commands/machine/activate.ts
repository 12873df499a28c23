import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { formatMachine } from '../../cli/machine-output.js';
import { reactivateMachine, type MachineChange } from '../../lib/licensing/machines.js';

export default class MachineActivate extends BaseCommand<typeof MachineActivate> {
  static override description = 'Activate a deactivated machine again; it needs a free seat, like a new machine.';
  static override args = { id: Args.string({ description: 'Machine id (UUID), from `machine list`.', required: true }) };

  async run(): Promise<MachineChange> {
    const change = await this.withDatabase((db) => reactivateMachine(db, this.args.id, this.operationContext()));
    for (const warning of change.warnings) this.warnLine(warning);
    this.say(formatMachine(change.machine));
    return change;
  }
}
