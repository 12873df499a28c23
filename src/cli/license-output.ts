import type { License } from '../lib/licensing/licenses.js';
import { formatRecord } from './output.js';

export function formatLicense(license: License): string {
  const entitlements = license.entitlements.length
    ? license.entitlements.map((e) => (e.usage_limit === null ? e.code : `${e.code} (limit ${e.usage_limit})`)).join(', ')
    : '-';
  return formatRecord([
    ['id', license.id],
    ['key', license.key],
    ['customer', `${license.customer_name} (${license.customer_id})${license.customer_active ? '' : ' [inactive]'}`],
    ['type', license.type],
    ['active', license.active],
    ['valid from', license.valid_from],
    ['valid until', license.valid_until],
    ['entitlements', entitlements],
    ['decryption key', license.has_decryption_key ? 'yes (see --reveal-decryption-key)' : 'no'],
    ['created', license.created_at],
  ]);
}
