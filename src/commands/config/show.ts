import { BaseCommand } from '../../cli/base-command.js';
import { serverFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { displayEntries } from '../../lib/config/resolve.js';

interface ConfigView {
  config_file: string | null;
  settings: Array<{ key: string; value: string | null; source: string }>;
}

export default class ConfigShow extends BaseCommand<typeof ConfigShow> {
  static override description = 'Print the effective settings and where each comes from (secrets redacted).';
  static override flags = { ...serverFlags };

  async run(): Promise<ConfigView> {
    const config = await this.resolveConfig();
    const settings = displayEntries(config);
    this.say(`config file: ${config.configFile ?? '(none)'}`);
    this.say(
      formatTable(settings, [
        { header: 'KEY', value: (s) => s.key },
        { header: 'VALUE', value: (s) => s.value },
        { header: 'SOURCE', value: (s) => s.source },
      ]),
    );
    return { config_file: config.configFile ?? null, settings };
  }
}
