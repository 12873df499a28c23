import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { formatTable } from '../../cli/output.js';
import { renderReport } from '../../cli/report.js';
import type { ResolvedConfig } from '../../lib/config/resolve.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { DeliveryResult } from '../../lib/notifications/notifier.js';
import type { EmailTestResult } from '../../lib/notifications/test-email.js';

type WebhookTestResult = DeliveryResult & { readonly target: string; readonly channel: 'webhook' };
type TestResult = WebhookTestResult | EmailTestResult;

export default class NotificationsTest extends BaseCommand<typeof NotificationsTest> {
  static override description = `Send a test event (notification.test) to one webhook or all of them, or a test email, once each, and report what happened.
Exits 15 when a target did not take it (WEBHOOK_NOT_DELIVERED, EMAIL_NOT_DELIVERED); with --json the output stays the list of results.`;
  static override flags = {
    webhook: Flags.string({ description: 'Only this webhook (default: every enabled one, unless --email is given).' }),
    email: Flags.string({ description: 'Send a test email to this address through notifications.smtp (alone, unless --webhook is given too).' }),
  };

  async run(): Promise<TestResult[]> {
    const config = await this.resolveConfig();
    const { email, webhook } = this.flags;
    if (email !== undefined) await this.checkEmail(email, config);
    const results: TestResult[] = email === undefined || webhook !== undefined ? await this.testWebhooks(webhook) : [];
    if (email !== undefined) {
      const { sendTestEmail } = await import('../../lib/notifications/test-email.js');
      results.push(await sendTestEmail(config.settings.notifications.smtp!, email, config.settings.issuer));
    }
    this.say(formatTable(results, [
      { header: 'TARGET', value: (r) => r.target },
      { header: 'DELIVERED', value: (r) => r.delivered },
      { header: 'STATUS', value: (r) => (r.channel === 'email' ? (r.error ?? r.response) : webhookStatus(r)) },
    ]));
    // A failed test is what this command reports, not a failure of it: the table (or the
    // JSON list) still stands, followed by the error lines on standard error.
    const failures = (['webhook', 'email'] as const).flatMap((channel) => {
      const mine = results.filter((result) => result.channel === channel);
      const failed = mine.filter((result) => !result.delivered).length;
      if (failed === 0) return [];
      return channel === 'webhook'
        ? [new LicenseServerError('WEBHOOK_NOT_DELIVERED', `${failed} of ${mine.length} webhook(s) did not take the test event`)]
        : [new LicenseServerError('EMAIL_NOT_DELIVERED', `the test email to ${email} was not delivered`)];
    });
    for (const error of failures) {
      if (!this.jsonEnabled()) process.stderr.write(renderReport(error, false).stderr!);
      process.exitCode = error.exitCode;
    }
    return results;
  }

  private async checkEmail(email: string, config: ResolvedConfig): Promise<void> {
    const { isPlainAddress } = await import('../../lib/notifications/email-address.js');
    if (!isPlainAddress(email)) throw new LicenseServerError('INVALID_INPUT', `--email must be one plain address such as ops@example.com, got ${JSON.stringify(email.slice(0, 100))}`);
    if (config.settings.notifications.smtp === undefined) {
      throw new LicenseServerError('SMTP_NOT_CONFIGURED', 'no SMTP server is configured: notifications.smtp.host is not set, so no email can be sent');
    }
  }

  private async testWebhooks(only: string | undefined): Promise<WebhookTestResult[]> {
    const { Notifier } = await import('../../lib/notifications/notifier.js');
    const { readNotificationSettings } = await import('../../lib/notifications/settings.js');
    return this.withDatabase(async (db, config) => {
      const settings = await readNotificationSettings(db);
      const hooks = settings.webhooks.filter((hook) => (only ? hook.name === only : hook.enabled));
      if (hooks.length === 0) throw new LicenseServerError('INVALID_INPUT', only ? `no webhook is named ${JSON.stringify(only)}` : 'no webhook is enabled');
      const notifier = new Notifier({
        server: () => config.settings.issuer,
        log: () => undefined,
        retryDelaysMs: [],
        allowLinkLocal: () => config.settings.notifications.allowLinkLocal,
      });
      const results = await Promise.all(hooks.map((hook) => notifier.send(hook, notifier.build('notification.test', { message: 'a test from license-server notifications test' }))));
      return results.map((result) => ({ target: result.webhook, channel: 'webhook' as const, ...result }));
    });
  }
}

function webhookStatus(r: DeliveryResult): string | number | undefined {
  if (r.status === undefined) return r.error;
  return r.error ? `${r.status} (${[r.error, r.location].filter(Boolean).join(': ')})` : r.status;
}
