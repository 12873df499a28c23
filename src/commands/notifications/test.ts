import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { DeliveryResult } from '../../lib/notifications/notifier.js';

export default class NotificationsTest extends BaseCommand<typeof NotificationsTest> {
  static override description = 'Send a test event (notification.test) to one webhook or all of them, once each, and report what happened.';
  static override flags = { webhook: Flags.string({ description: 'Only this webhook (default: every enabled one).' }) };

  async run(): Promise<DeliveryResult[]> {
    const { Notifier } = await import('../../lib/notifications/notifier.js');
    const { readNotificationSettings } = await import('../../lib/notifications/settings.js');
    const results = await this.withDatabase(async (db, config) => {
      const settings = await readNotificationSettings(db);
      const hooks = settings.webhooks.filter((hook) => (this.flags.webhook ? hook.name === this.flags.webhook : hook.enabled));
      if (hooks.length === 0) throw new LicenseServerError('INVALID_INPUT', this.flags.webhook ? `no webhook is named ${JSON.stringify(this.flags.webhook)}` : 'no webhook is enabled');
      const notifier = new Notifier({
        database: () => db,
        server: () => config.settings.issuer,
        log: () => undefined,
        retryDelaysMs: [],
        allowLinkLocal: () => config.settings.notifications.allowLinkLocal,
      });
      return Promise.all(hooks.map((hook) => notifier.send(hook, notifier.build('notification.test', { message: 'a test from license-server notifications test' }))));
    });
    this.say(formatTable(results, [
      { header: 'WEBHOOK', value: (r) => r.webhook },
      { header: 'DELIVERED', value: (r) => r.delivered },
      { header: 'STATUS', value: (r) => (r.status === undefined ? r.error : r.error ? `${r.status} (${[r.error, r.location].filter(Boolean).join(': ')})` : r.status) },
    ]));
    if (results.some((result) => !result.delivered)) process.exitCode = 12;
    return results;
  }
}
