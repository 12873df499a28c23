import type { NotificationEvent } from './notifier.js';

/**
 * `{{name}}` placeholders filled from the event: `event`, `occurred_at`, `server`, and every
 * field of its data (`{{backup_id}}`, `{{error}}`, ...). Unknown names become empty. The
 * result is plain text: values are inserted as they are, never interpreted.
 */
export function renderTemplate(template: string, event: NotificationEvent): string {
  const fields: Record<string, unknown> = { event: event.event, occurred_at: event.occurred_at, server: event.server, ...event.data };
  return template.replace(/\{\{\s*([A-Za-z0-9_.]+)\s*\}\}/g, (_, name: string) => {
    const value = fields[name];
    if (value === undefined || value === null) return '';
    return typeof value === 'object' ? JSON.stringify(value) : String(value);
  });
}

/** Example data for `notifications preview`. */
export const SAMPLE_DATA: Record<string, Record<string, unknown>> = {
  'backup.succeeded': { backup_id: '20261122T020000000Z-3f9a1c', trigger: 'scheduled', size: 314572800, encrypted: true },
  'backup.failed': { trigger: 'scheduled', error: 'no space left on the device' },
  'backup.restored': { backup_id: '20261122T020000000Z-3f9a1c', pre_restore_backup_id: '20261122T101500123Z-77aa01', actor: 'token:ops' },
  'license.checked_out': { license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d', license_key_prefix: '7KQ2-M9X', valid_until: '2026-12-22T10:00:00.000Z', hardware_id: 'HW-1', actor: 'token:ops' },
};
