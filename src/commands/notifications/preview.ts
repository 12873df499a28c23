import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';

export default class NotificationsPreview extends BaseCommand<typeof NotificationsPreview> {
  static override description = 'Render the email template of an event with example data, as an alert email would read.';
  static override flags = {
    event: Flags.string({ description: 'The event.', required: true, options: ['backup.succeeded', 'backup.failed', 'backup.restored', 'license.checked_out'] }),
  };

  async run(): Promise<{ event: string; template: string | null; subject: string; body: string }> {
    const [{ readNotificationSettings }, { eventMatches }] = await Promise.all([import('../../lib/notifications/settings.js'), import('../../lib/notifications/events.js')]);
    const { renderTemplate, SAMPLE_DATA } = await import('../../lib/notifications/render.js');
    const { event } = this.flags;
    const settings = await this.withDatabase((db) => readNotificationSettings(db));
    const template = settings.email_templates.find((candidate) => eventMatches(candidate.event, event));
    const payload = { id: 'preview', event, occurred_at: new Date().toISOString(), server: 'license-server', data: SAMPLE_DATA[event] ?? {} };
    const subject = template ? renderTemplate(template.subject, payload) : `[license-server] ${event}`;
    const body = template ? renderTemplate(template.body, payload) : JSON.stringify(payload.data, null, 2);
    this.say(`Subject: ${subject}\n\n${body}`);
    return { event, template: template?.event ?? null, subject, body };
  }
}
