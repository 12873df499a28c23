import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import type { NotificationSettings } from '../../lib/notifications/settings.js';

export default class NotificationsShow extends BaseCommand<typeof NotificationsShow> {
  static override description = 'Print the notification settings (webhooks, alert rules, email templates) as YAML, the form `notifications set --file` reads.';
  static override flags = {
    'reveal-secrets': Flags.boolean({ description: 'Show webhook secrets, and the passwords and query strings of webhook URLs, instead of [redacted] and ***.', default: false }),
  };

  async run(): Promise<NotificationSettings> {
    const { readNotificationSettings, redactSettings } = await import('../../lib/notifications/settings.js');
    const settings = await this.withDatabase((db) => readNotificationSettings(db));
    const shown = this.flags['reveal-secrets'] ? settings : redactSettings(settings);
    if (!this.jsonEnabled()) {
      const { stringify } = await import('yaml');
      process.stdout.write(stringify(shown));
    }
    return shown;
  }
}
