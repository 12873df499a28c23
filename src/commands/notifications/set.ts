import { readFile } from 'node:fs/promises';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { LicenseServerError } from '../../lib/errors.js';
import { describeFsError } from '../../lib/fs-errors.js';
import type { NotificationSettings } from '../../lib/notifications/settings.js';

export default class NotificationsSet extends BaseCommand<typeof NotificationsSet> {
  static override description = `Replace all notification settings with those of a YAML or JSON file (docs/notifications.md).
A webhook without a secret gets a random one, printed once; a secret of [redacted] (as show prints it) keeps the stored one, and so do URL parts shown as *** (password, query); any other secret is stored as given, and shown by nothing but show --reveal-secrets.
A URL naming a link-local address (169.254.0.0/16, fe80::/10) is refused unless notifications.allow_link_local is set.`;
  static override examples = ['<%= config.bin %> notifications show > notifications.yaml && $EDITOR notifications.yaml && <%= config.bin %> notifications set --file notifications.yaml'];
  static override flags = { file: Flags.string({ description: 'The settings file.', required: true }) };

  async run(): Promise<{ settings: NotificationSettings; generated_secrets: Record<string, string> }> {
    let text: string;
    try {
      text = await readFile(this.flags.file, 'utf8');
    } catch (error) {
      throw new LicenseServerError('FILE_UNREADABLE', `cannot read ${this.flags.file}: ${describeFsError(error)}`);
    }
    const { parse } = await import('yaml');
    let document: unknown;
    try {
      document = parse(text) ?? {};
    } catch (error) {
      throw new LicenseServerError('INVALID_INPUT', `${this.flags.file} is not YAML or JSON: ${(error as Error).message.split('\n')[0]}`);
    }
    const { replaceNotificationSettings, redactSettings } = await import('../../lib/notifications/settings.js');
    const result = await this.withDatabase((db, config) =>
      replaceNotificationSettings(db, document, this.operationContext(), { allowLinkLocal: config.settings.notifications.allowLinkLocal }),
    );
    const { settings } = result;
    this.say(`notification settings replaced: ${settings.webhooks.length} webhook(s), ${settings.rules.length} rule(s), ${settings.email_templates.length} email template(s)`);
    for (const [name, secret] of Object.entries(result.generated)) this.say(`generated secret for webhook ${name} (shown only this once): ${secret}`);
    return { settings: redactSettings(settings), generated_secrets: result.generated };
  }
}
