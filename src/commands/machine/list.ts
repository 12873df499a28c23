import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatMachines } from '../../cli/machine-output.js';
import { now } from '../../lib/context.js';
import { getLicense } from '../../lib/licensing/licenses.js';
import { listMachinesPage, type Machine } from '../../lib/licensing/machines.js';

export default class MachineList extends BaseCommand<typeof MachineList> {
  static override description = 'List the machines that use licenses: hardware ID, seat, last seen, and until when an offline file or lease holds the seat.';
  static override examples = ['<%= config.bin %> machine list --license 0b6c4f8e-... --holding-seat'];
  static override flags = {
    license: Flags.string({ description: 'Only the machines of this license (id or key).' }),
    'holding-seat': Flags.boolean({ description: 'Only machines that hold a seat now.', allowNo: true }),
    ...pagingFlags,
  };

  async run(): Promise<Machine[]> {
    const { flags } = this;
    const { items: machines, next_cursor } = await this.withDatabase(async (db) => {
      const licenseId = flags.license === undefined ? undefined : (await getLicense(db, flags.license)).id;
      return listMachinesPage(db, {
        ...(licenseId === undefined ? {} : { licenseId }),
        ...(flags['holding-seat'] === undefined ? {} : { holdingSeat: flags['holding-seat'] }),
        limit: flags.limit,
        offset: flags.offset,
        cursor: flags.cursor,
      }, now(this.operationContext()));
    });
    this.say(formatMachines(machines));
    this.sayNextPage(next_cursor);
    return machines;
  }
}
