import { renderTemplate } from './render.js';
import { eventMatches, type EventName } from './events.js';
import type { EmailTemplate } from './settings.js';
import type { NotificationEvent } from './notifier.js';

/**
 * The email each event sends when no email template of the settings matches it
 * (docs/notifications.md lists them with the variables they use). Plain text. Any of them may
 * go to a customer (a rule's `email: customer`), so a license is named by the start of its
 * key, which its customer knows, never by its internal id; counts agree with their nouns.
 */
export const DEFAULT_EMAIL_TEMPLATES: Readonly<Record<EventName | 'notification.test', { readonly subject: string; readonly body: string }>> = {
  'backup.succeeded': { subject: '[{{server}}] Backup {{backup_id}} made', body: 'The {{trigger}} backup {{backup_id}} was made and verified ({{size}} bytes, encrypted: {{encrypted}}).' },
  'backup.failed': { subject: '[{{server}}] Backup failed', body: 'The {{trigger}} backup failed: {{error}}' },
  'backup.copy_failed': { subject: '[{{server}}] Backup {{backup_id}} not copied to {{target}}', body: 'Backup {{backup_id}} was made and kept on this host, but copying it to the off-site target {{target}} failed ({{reason}}): {{error}}. It is retried; `backup status` shows each target.' },
  'backup.stale': { subject: '[{{server}}] No recent backup on {{place}}', body: 'The newest good backup on {{place}} is {{newest_backup_id}}, made {{newest_created_at}} ({{age_hours|hour|hours}} ago), older than the {{max_age_hours|hour|hours}} allowed. Last error: {{last_error}}.' },
  'backup.replication_stalled': { subject: '[{{server}}] Replication to {{target}} stalled', body: 'The replica of the database on {{target}} has been {{lag_seconds|second|seconds}} behind: writes newer than that would be lost with this host. Last error: {{last_error}}. GET /api/backups/status shows the replication.' },
  'backup.drill_failed': { subject: '[{{server}}] Restore drill failed', body: 'A restore drill started at {{started_at}} failed on {{failed_count|part|parts}}: {{failed}}. A restore from there may fail or lose writes now. `license-server backup drill` runs it again and lists every check.' },
  'backup.restored': { subject: '[{{server}}] Backup {{backup_id}} restored', body: 'Backup {{backup_id}} was restored by {{actor}}. The data it replaced is in backup {{pre_restore_backup_id}}.' },
  'license.checked_out': { subject: '[{{server}}] License {{license_key_prefix}}... checked out', body: 'License {{license_key_prefix}}... of {{customer_name}} was checked out to a file valid until {{valid_until}} (hardware ID: {{hardware_id}}), by {{actor}}.' },
  'license.created': { subject: '[{{server}}] New license for {{customer_name}}', body: 'License {{license_key_prefix}}... ({{type}}) was created for {{customer_name}}, valid from {{valid_from}} until {{valid_until}}.' },
  'license.updated': { subject: '[{{server}}] License {{license_key_prefix}}... changed', body: 'License {{license_key_prefix}}... of {{customer_name}} was changed by {{actor}}: {{summary}}.' },
  'license.renewed': { subject: '[{{server}}] License renewed until {{valid_until}}', body: 'License {{license_key_prefix}}... of {{customer_name}} was renewed: it is now valid until {{valid_until}} (it was {{previous_valid_until}}).' },
  'license.deactivated': { subject: '[{{server}}] License {{license_key_prefix}}... deactivated', body: 'License {{license_key_prefix}}... of {{customer_name}} was deactivated by {{actor}}.' },
  'license.expired': { subject: '[{{server}}] License {{license_key_prefix}}... has expired', body: 'License {{license_key_prefix}}... of {{customer_name}} expired at {{valid_until}}.' },
  'license.expiring_soon': { subject: 'Your license expires in {{days_left|day|days}}', body: 'Dear {{customer_name}},\n\nyour license with the key {{license_key_prefix}}... expires at {{valid_until}}, in {{days_left|day|days}}. Please renew it in time to keep using the software.' },
  'machine.activated': { subject: '[{{server}}] New machine on license {{license_key_prefix}}...', body: 'Machine {{hardware_id}} ({{machine_name}}) started using license {{license_key_prefix}}... of {{customer_name}}.' },
  'machine.migrated': { subject: '[{{server}}] Machine moved to a new hardware ID on license {{license_key_prefix}}...', body: 'Machine {{machine_id}} of license {{license_key_prefix}}... ({{customer_name}}) now derives hardware ID {{hardware_id}}; it was {{previous_hardware_id}}. It keeps its seat.' },
  'machine.limit_exceeded': { subject: '[{{server}}] Machine limit reached on license {{license_key_prefix}}...', body: 'License {{license_key_prefix}}... of {{customer_name}} allows {{max_machines|machine|machines}}; {{refused_count|new machine was|new machines were}} refused, the last one {{hardware_id}}.' },
  'usage.threshold': { subject: '[{{server}}] {{percent}}% of {{entitlement}} used', body: 'License {{license_key_prefix}}... of {{customer_name}} has used {{used}} of {{usage_limit}} for {{entitlement}} ({{percent}}%).' },
  'signing_key.rotated': { subject: '[{{server}}] Signing key rotated', body: 'The signing key was rotated by {{actor}}: new key {{key_id}} (previous {{previous_key_id}}). Clients that verify files offline need the new public key.' },
  'notification.test': { subject: '[{{server}}] Test notification', body: '{{message}}' },
};

/**
 * The subject and text of an event's email: the first email template of the settings whose
 * pattern matches, else the event's default. The subject is one line whatever the values
 * hold: line breaks and other control characters become spaces, so that a value (a customer
 * name) cannot start a header of its own.
 */
export function renderEmail(templates: readonly EmailTemplate[], event: NotificationEvent): { subject: string; text: string } {
  const chosen = templates.find((template) => eventMatches(template.event, event.event))
    ?? DEFAULT_EMAIL_TEMPLATES[event.event as EventName]
    ?? { subject: '[{{server}}] {{event}}', body: '{{event}} at {{occurred_at}}' };
  const subject = renderTemplate(chosen.subject, event).replace(/[\u0000-\u001f\u007f]+/g, ' ').trim().slice(0, 900);
  return { subject, text: renderTemplate(chosen.body, event) };
}
