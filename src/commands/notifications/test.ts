import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { renderReport } from '../../cli/report.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { DeliveryResult } from '../../lib/notifications/notifier.js';

export default class NotificationsTest extends BaseCommand<typeof NotificationsTest> {
  static override description = `Send a test event (notification.test) to one webhook or all of them, once each, and report what happened.
Exits 15 (WEBHOOK_NOT_DELIVERED) when any webhook did not take it; with --json the output stays the list of results.`;
  static override flags = { webhook: Flags.string({ description: 'Only this webhook (default: every enabled one).' }) };

  async run(): Promise<DeliveryResult[]> {
    const { Notifier } = await import('../../lib/notifications/notifier.js');
    const { readNotificationSettings } = await import('../../lib/notifications/settings.js');
    const results = await this.withDatabase(async (db, config) => {
      const settings = await readNotificationSettings(db);
      const hooks = settings.webhooks.filter((hook) => (this.flags.webhook ? hook.name === this.flags.webhook : hook.enabled));
      if (hooks.length === 0) throw new LicenseServerError('INVALID_INPUT', this.flags.webhook ? `no webhook is named ${JSON.stringify(this.flags.webhook)}` : 'no webhook is enabled');
      const notifier = new Notifier({
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
    const failed = results.filter((result) => !result.delivered).length;
    if (failed > 0) {
      // A failed test is what this command reports, not a failure of it: the table (or the
      // JSON list) still stands, followed by the error lines on standard error.
      const error = new LicenseServerError('WEBHOOK_NOT_DELIVERED', `${failed} of ${results.length} webhook(s) did not take the test event`);
      if (!this.jsonEnabled()) process.stderr.write(renderReport(error, false).stderr!);
      process.exitCode = error.exitCode;
    }
    return results;
  }
}
