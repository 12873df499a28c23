import type { OperationContext } from '../context.js';
import { licenseKeyPrefix } from '../licensing/license-key.js';
import type { Queryable } from '../storage/types.js';
import { asIso } from '../storage/values.js';
import { raiseEvent } from './outbox.js';
import { hasEnabledRuleFor, type EventName } from './events.js';

/**
 * What every license event's data starts with (docs/notifications.md, "License events"). The key's
 * prefix only: the whole key is a credential, and a webhook body or an email is not the
 * place for one. `customer_id` is what a rule sending to `customer` resolves.
 */
export type LicenseEventFields = {
  readonly license_id: string;
  readonly customer_id: string;
  readonly customer_name: string;
  readonly license_key_prefix: string;
  readonly valid_until: string;
};

export function licenseFields(license: {
  readonly id: string;
  readonly customer_id: string;
  readonly customer_name: string;
  readonly key_prefix: string;
  readonly valid_until: string;
}): LicenseEventFields {
  return {
    license_id: license.id,
    customer_id: license.customer_id,
    customer_name: license.customer_name,
    license_key_prefix: license.key_prefix,
    valid_until: license.valid_until,
  };
}

/** The columns licenseFieldsOfRow reads, over `licenses l JOIN customers c`. */
export const LICENSE_FIELD_COLUMNS = 'l.id, l.license_key, l.customer_id, c.name AS customer_name, l.valid_until';

export function licenseFieldsOfRow(row: Record<string, unknown>): LicenseEventFields {
  return {
    license_id: String(row.id),
    customer_id: String(row.customer_id),
    customer_name: String(row.customer_name),
    license_key_prefix: licenseKeyPrefix(String(row.license_key)),
    valid_until: asIso(row.valid_until),
  };
}

/**
 * Raises a license event where the caller holds only the license's id (a machine admitted,
 * a refusal, a usage report): the license's fields are read only when a rule wants the
 * event, so that the common case, no rule, costs one small query.
 */
export async function raiseLicenseEvent(
  tx: Queryable,
  event: EventName,
  licenseId: string,
  extra: Record<string, unknown>,
  context?: Pick<OperationContext, 'clock'>,
): Promise<void> {
  if (!(await hasEnabledRuleFor(tx, event))) return;
  const rows = await tx.query(`SELECT ${LICENSE_FIELD_COLUMNS} FROM licenses l JOIN customers c ON c.id = l.customer_id WHERE l.id = ?`, [licenseId]);
  if (!rows[0]) return;
  await raiseEvent(tx, event, { ...licenseFieldsOfRow(rows[0]), ...extra }, context);
}
