import { licenseKeyPrefix } from '../licensing/license-key.js';
import { licenseParam, licenseWhere, type License, type LicenseType } from '../licensing/licenses.js';
import { MACHINE_COLUMNS, type SeatPolicy } from '../licensing/machines.js';
import type { LicenseFileEntitlement } from './format.js';
import type { Engine, Queryable, Row } from '../storage/types.js';
import { asBool, asBytesOrNull, asIntOrNull, asIso } from '../storage/values.js';
import { sealedWithOf } from '../signing-keys/signer.js';

/** What a checkout needs of a license: its terms, its customer, and its file's entitlements. */
export interface CheckoutLicense
  extends SeatPolicy,
    Pick<License, 'key_prefix' | 'customer_id' | 'customer_name' | 'customer_active' | 'type' | 'active' | 'valid_from' | 'valid_until' | 'binding'> {
  /** Sorted by code, as getLicense sorts them. */
  readonly entitlements: readonly LicenseFileEntitlement[];
}

export interface CheckoutSource {
  readonly license: CheckoutLicense;
  /** The whole license key: a request's digest is checked against it. Never log it. */
  readonly licenseKey: string;
  /** The license's 32-byte decryption key, or null. The caller zeroes it; never log it. */
  readonly decryptionKey: Buffer | null;
  /** The machine of the hardware ID, as admitMachine takes it; undefined when new or unbound. */
  readonly machine: Row | undefined;
  /** The store's active signing key, read with the license so a rotation elsewhere counts at once. */
  readonly signingKeyId: string | undefined;
  /** How it is stored (its kek id when sealed): a protect elsewhere counts at once too (signer.ts). */
  readonly signingKeySealedWith: string | null;
}

/**
 * `is_current` is compared with the literal TRUE, never a bound value: SQLite re-prepares a
 * statement on every new binding of a parameter that could select a partial index
 * (signing_keys_one_current), which costs more than the whole rest of the query.
 */
const ACTIVE_KEY_ID = 'SELECT key_id, sealed_with FROM signing_keys WHERE is_current = TRUE';

/**
 * The license's entitlements as one JSON array of [code, name, usage_limit] in a column of
 * the license's row: three rows of thirty columns, one per entitlement, cost SQLite twice
 * what the whole row with its array does. The aggregate is each engine's own.
 */
const ENTITLEMENTS_JSON: Record<Engine, string> = {
  sqlite: 'json_group_array(json_array(e.code, e.name, le.usage_limit))',
  postgres: 'json_agg(json_build_array(e.code, e.name, le.usage_limit))',
};

const statements = new Map<string, string>();

function checkoutSql(engine: Engine, where: string): string {
  const cacheKey = `${engine} ${where}`;
  let sql = statements.get(cacheKey);
  if (!sql) {
    sql = `SELECT l.id, l.license_key, l.customer_id, c.name AS customer_name, c.active AS customer_active, l.type, l.active,
        l.valid_from, l.valid_until, l.decryption_key, l.max_machines, l.floating, l.lease_hours, l.binding,
        (SELECT ${ENTITLEMENTS_JSON[engine]} FROM license_entitlements le JOIN entitlements e ON e.id = le.entitlement_id
         WHERE le.license_id = l.id) AS entitlements,
        ${MACHINE_COLUMNS.map((column) => `m.${column} AS m_${column}`).join(', ')},
        k.key_id AS signing_key_id, k.sealed_with AS signing_key_sealed_with
      FROM licenses l JOIN customers c ON c.id = l.customer_id
      LEFT JOIN machines m ON m.license_id = l.id AND m.hardware_id = ?
      LEFT JOIN signing_keys k ON k.is_current = TRUE
      WHERE ${where}`;
    statements.set(cacheKey, sql);
  }
  return sql;
}

/**
 * Everything a checkout reads, in one statement inside its transaction: the license, its
 * customer, its entitlements, its decryption key, the machine of `hardwareId` and the active
 * signing key's id. On PostgreSQL each statement saved is a round trip saved; on SQLite a
 * prepared-statement step and a promise. Undefined when no license matches.
 */
export async function readCheckoutSource(
  tx: Queryable,
  engine: Engine,
  reference: string,
  hardwareId: string | undefined,
): Promise<CheckoutSource | undefined> {
  // An unbound checkout binds NULL, which matches no machine.
  const rows = await tx.query(checkoutSql(engine, licenseWhere(reference)), [hardwareId ?? null, licenseParam(reference)]);
  const first = rows[0];
  if (!first) return undefined;
  const decryptionKey = asBytesOrNull(first.decryption_key);
  const entitlements = parseEntitlements(first.entitlements);
  const floating = asBool(first.floating);
  const license: CheckoutLicense = {
    id: String(first.id),
    key_prefix: licenseKeyPrefix(String(first.license_key)),
    customer_id: String(first.customer_id),
    customer_name: String(first.customer_name),
    customer_active: asBool(first.customer_active),
    type: String(first.type) as LicenseType,
    active: asBool(first.active),
    valid_from: asIso(first.valid_from),
    valid_until: asIso(first.valid_until),
    max_machines: asIntOrNull(first.max_machines),
    floating,
    lease_hours: Number(first.lease_hours),
    binding: String(first.binding) as License['binding'],
    entitlements,
  };
  const machine = first.m_id === null || first.m_id === undefined
    ? undefined
    : { ...Object.fromEntries(MACHINE_COLUMNS.map((column) => [column, first[`m_${column}`]])), floating: first.floating };
  const signingKeyId = first.signing_key_id === null || first.signing_key_id === undefined ? undefined : String(first.signing_key_id);
  return { license, licenseKey: String(first.license_key), decryptionKey, machine, signingKeyId, signingKeySealedWith: sealedWithOf(first.signing_key_sealed_with) };
}

/** SQLite gives the array as JSON text, PostgreSQL parsed, or null when there is none. */
function parseEntitlements(value: unknown): LicenseFileEntitlement[] {
  const triples = (typeof value === 'string' ? JSON.parse(value) : value ?? []) as Array<[string, string, number | null]>;
  const entitlements = triples.map(([code, name, limit]) => ({ code: String(code), name: String(name), usage_limit: asIntOrNull(limit) }));
  // Sorted as getLicense sorts them.
  return entitlements.sort((a, b) => (a.code < b.code ? -1 : a.code > b.code ? 1 : 0));
}

/** The active signing key's id and sealing, for a checkout that found no license to read them with. */
export async function activeSigningKey(tx: Queryable): Promise<{ readonly keyId: string; readonly sealedWith: string | null } | undefined> {
  const rows = await tx.query(ACTIVE_KEY_ID);
  return rows[0] ? { keyId: String(rows[0].key_id), sealedWith: sealedWithOf(rows[0].sealed_with) } : undefined;
}
