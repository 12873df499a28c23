import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatMachine } from '../../cli/machine-output.js';
import { releaseLostFiles, type MachineChange } from '../../lib/licensing/machines.js';

export default class MachineRelease extends BaseCommand<typeof MachineRelease> {
  static override description = `Free the seat that a machine's offline files hold, declaring them lost (a checkout that never reached the machine, a USB stick gone missing).
Audited as machine.offline_files_released. A lost file found again still works until it ends, on a seat that may have gone to another machine. A grace token, or an active machine of a node-locked license, keeps holding the seat: the warnings say so.`;
  static override examples = ['<%= config.bin %> machine release 9d0f6c1e-3b7a-4c2d-8e5f-1a2b3c4d5e6f --lost-file --reason "stick lost in transit"'];
  static override args = { id: Args.string({ description: 'Machine id (UUID), from `machine list`.', required: true }) };
  static override flags = {
    'lost-file': Flags.boolean({ description: 'State that every offline file checked out for this machine is lost (required).', required: true }),
    reason: Flags.string({ description: 'Why, for the audit log (1-500 characters).' }),
  };

  async run(): Promise<MachineChange> {
    const reason = this.flags.reason === undefined ? {} : { reason: this.flags.reason };
    const change = await this.withDatabase((db) => releaseLostFiles(db, this.args.id, reason, this.operationContext()));
    for (const warning of change.warnings) this.warnLine(warning);
    this.say(formatMachine(change.machine));
    return change;
  }
}
