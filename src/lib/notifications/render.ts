import type { NotificationEvent } from './notifier.js';

/**
 * `{{name}}` placeholders filled from the event: `event`, `occurred_at`, `server`, and every
 * field of its data (`{{backup_id}}`, `{{error}}`, ...). Unknown names become empty. The
 * result is plain text: values are inserted as they are, never interpreted.
 *
 * `{{name|one|other}}` is a count with its noun: the value, a space, and `one` when the value
 * is 1, `other` otherwise (`{{days_left|day|days}}`: `1 day`, `7 days`); empty like any
 * placeholder when the event has no such value.
 */
export function renderTemplate(template: string, event: NotificationEvent): string {
  const fields: Record<string, unknown> = { event: event.event, occurred_at: event.occurred_at, server: event.server, ...event.data };
  return template.replace(/\{\{\s*([A-Za-z0-9_.]+)\s*(?:\|([^|{}]*)\|([^|{}]*))?\}\}/g, (_, name: string, one: string | undefined, other: string | undefined) => {
    const value = fields[name];
    if (value === undefined || value === null) return '';
    const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
    if (one === undefined || other === undefined) return text;
    const isOne = (typeof value === 'number' || typeof value === 'string') && Number(value) === 1;
    return `${text} ${(isOne ? one : other).trim()}`;
  });
}

/** Example data for `notifications preview`. */
export const SAMPLE_DATA: Record<string, Record<string, unknown>> = {
  'backup.succeeded': { backup_id: '20261122T020000000Z-3f9a1c', trigger: 'scheduled', size: 314572800, encrypted: true },
  'backup.failed': { trigger: 'scheduled', error: 'no space left on the device' },
  'backup.restored': { backup_id: '20261122T020000000Z-3f9a1c', pre_restore_backup_id: '20261122T101500123Z-77aa01', actor: 'token:ops' },
  'license.checked_out': { license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d', license_key_prefix: '7KQ2-M9X', valid_until: '2026-12-22T10:00:00.000Z', hardware_id: 'HW-1', actor: 'token:ops' },
  ...Object.fromEntries(Object.entries({
    'license.created': { type: 'time_based', valid_from: '2026-11-22T00:00:00.000Z', max_machines: 3, entitlements: [], actor: 'token:ops' },
    'license.updated': { changes: { max_machines: { before: 3, after: 5 } }, summary: 'max_machines: 3 -> 5', actor: 'token:ops' },
    'license.renewed': { previous_valid_until: '2026-12-31T00:00:00.000Z', actor: 'token:ops' },
    'license.deactivated': { actor: 'token:ops' },
    'license.expired': {},
    'license.expiring_soon': { days_left: 7, window_days: 7 },
    'machine.activated': { machine_id: '5e0c7a52-8d1b-4f3e-a6c2-9b8d7e6f5a41', hardware_id: 'HW-1', machine_name: 'build-01', client_version: '1.4.0', actor: 'client:203.0.113.7' },
    'machine.migrated': { machine_id: '5e0c7a52-8d1b-4f3e-a6c2-9b8d7e6f5a41', hardware_id: 'hw2-02ae3be5b030af6d8658addb2291f6f036c96988777db8717bac7788e25943d8', previous_hardware_id: 'hw1-6f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f60718293', actor: 'client:203.0.113.7' },
    'machine.limit_exceeded': { max_machines: 3, hardware_id: 'HW-9', refused_count: 4 },
    'usage.threshold': { entitlement: 'api.calls', usage_limit: 10000, used: 8000, percent: 80 },
  }).map(([event, data]) => [event, {
    license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d',
    customer_id: '0b6c4f8e-2a1d-4c3b-8e7f-6a5b4c3d2e1f',
    customer_name: 'Acme GmbH',
    license_key_prefix: '7KQ2-M9X',
    valid_until: '2027-01-01T00:00:00.000Z',
    ...data,
  }])),
  'signing_key.rotated': { key_id: '9f2c4e1a7b3d5f60', previous_key_id: '1a2b3c4d5e6f7081', fingerprint: '9f2c4e1a7b3d5f60...', prepared: false, actor: 'cli:ops' },
};
