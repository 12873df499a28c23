import type { License } from '../lib/licensing/licenses.js';
import type { CheckoutRecord } from '../lib/licensing/usage-view.js';
import { escapeInvisible } from '../lib/validate.js';
import type { LicenseFilePayload } from '../lib/offline/format.js';
import { formatRecord, show } from './output.js';

export function formatLicense(license: License & { recent_checkouts?: readonly CheckoutRecord[] }): string {
  const entitlements = license.entitlements.length
    ? license.entitlements
      .map((e) => (e.usage_limit === null ? `${e.code} (used ${e.used})` : `${e.code} (used ${e.used} of ${e.usage_limit}, ${e.remaining} left)`))
      .join(', ')
    : '-';
  const seats = license.max_machines === null ? 'no limit' : `${license.max_machines}${license.floating ? ` floating, lease ${license.lease_hours} h` : ''}`;
  const metadata = Object.entries(license.metadata);
  return formatRecord([
    ['id', license.id],
    ['key', license.key],
    ['customer', `${license.customer_name} (${license.customer_id})${license.customer_active ? '' : ' [inactive]'}`],
    ['type', license.type],
    ['active', license.active],
    ['valid from', license.valid_from],
    ['valid until', license.valid_until],
    ['max machines', seats],
    ...(license.machines_in_use === undefined ? [] : [['machines in use', `${license.machines_in_use}${license.max_machines === null ? '' : ` of ${license.max_machines}`}`] as const]),
    ['entitlements', entitlements],
    ...(metadata.length ? [['metadata', metadata.map(([key, value]) => `${key}=${value}`).join(', ')] as const] : []),
    ['decryption key', license.has_decryption_key ? 'yes (see --reveal-decryption-key)' : 'no'],
    ['binding', license.binding === 'machine-key' ? 'machine-key (sealed to the machine\'s own key, from its activation request)' : 'hardware-id'],
    ['created', license.created_at],
    // One line per checkout, newest first: a record's values are single lines.
    ...(license.recent_checkouts ?? []).map((c) => [
      'checkout',
      `${show(c.checked_out_at)} by ${show(escapeInvisible(c.actor))}, ${c.hardware_id === null ? 'unbound' : `for ${show(escapeInvisible(c.hardware_id))}`}, valid until ${show(c.valid_until)}${c.voided ? ' (voided: its file was not written)' : ''}`,
    ] as const),
  ]);
}

/**
 * A .lic file's payload as commands show it: its times in the one form of every other time
 * they print (README, "Output for scripts"). The file itself keeps the whole seconds that
 * docs/offline-license-format.md fixes, and is never rewritten.
 */
export function payloadForOutput(payload: LicenseFilePayload): LicenseFilePayload {
  const time = (value: string) => new Date(value).toISOString();
  return { ...payload, valid_from: time(payload.valid_from), valid_until: time(payload.valid_until), issued_at: time(payload.issued_at) };
}
