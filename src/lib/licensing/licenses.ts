import { randomBytes, randomUUID } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { getCustomer } from '../customers.js';
import { getEntitlementByCode, parseEntitlementCode } from './entitlements.js';
import { LicenseServerError } from '../errors.js';
import { licenseFields } from '../notifications/license-events.js';
import { raiseEvent } from '../notifications/outbox.js';
import { generateLicenseKey, licenseKeyPrefix, normalizeLicenseKey } from './license-key.js';
import type { Keyset } from '../cursor.js';
import { countRows, pageQuery, pageRows, type ListCount, type ListPage, type Page, type PageQuery } from '../paging.js';
import { licenseWhere as filterWhere, type LicenseConditions } from './license-filters.js';
import { CUSTOMER_OF_LICENSE, licenseStatus, type LicenseStatus } from './license-status.js';
import { isUniqueViolation } from '../storage/errors.js';
import type { Database, Queryable, Row, SqlValue } from '../storage/types.js';
import { asBool, asBytesOrNull, asInt, asIntOrNull, asIso, asJson } from '../storage/values.js';
import { parseBinding, parseLeaseHours, parseMaxMachines, parseMetadata, type Binding } from './license-terms.js';
import { MACHINE_COLUMNS, seatHeld } from './machines.js';
import { describe, isUuid, parseTimestamp, parseUuid, truncateToSeconds } from '../validate.js';

export const LICENSE_TYPES = ['time_based', 'usage_based', 'hybrid'] as const;
export type LicenseType = (typeof LICENSE_TYPES)[number];

export interface LicenseEntitlement {
  readonly code: string;
  readonly name: string;
  readonly usage_limit: number | null;
  /** Counted by usage reports (POST /api/v1/usage). */
  readonly used: number;
  /** What is left of the limit; null when there is none. */
  readonly remaining: number | null;
}

export interface License {
  readonly id: string;
  readonly key: string;
  readonly key_prefix: string;
  readonly customer_id: string;
  readonly customer_name: string;
  readonly customer_active: boolean;
  readonly type: LicenseType;
  readonly active: boolean;
  /** At the time of the request (license-status.ts): suspended, expired, pending, expiring or active. */
  readonly status: LicenseStatus;
  readonly valid_from: string;
  readonly valid_until: string;
  readonly has_decryption_key: boolean;
  /** How many machines may hold a seat at once; null: no limit. */
  readonly max_machines: number | null;
  /** Seats move between machines as leases (see machines.ts) instead of staying with one. */
  readonly floating: boolean;
  /** How long a floating lease lasts without an online validation renewing it. */
  readonly lease_hours: number;
  /** Machines holding a seat now (see machines.ts); only on a license read with its seats. */
  readonly machines_in_use?: number;
  /** The vendor's own key/value pairs, for their systems; never in a .lic file. */
  readonly metadata: Readonly<Record<string, string>>;
  /**
   * How offline files seal the decryption key: to the hardware ID (format version 1) or to
   * the machine's own key from its activation request (version 2, `machine_key`).
   */
  readonly binding: Binding;
  /** Sorted by code (code point order, the same on every engine). */
  readonly entitlements: readonly LicenseEntitlement[];
  readonly created_at: string;
  readonly updated_at: string;
}

export interface EntitlementGrant {
  readonly code: string;
  readonly usageLimit: number | null;
}

export interface NewLicense {
  readonly customerId: string;
  readonly type: string;
  readonly validFrom?: Date | string;
  readonly validUntil: Date | string;
  readonly entitlements?: readonly EntitlementGrant[];
  readonly withDecryptionKey?: boolean;
  readonly maxMachines?: number | null;
  readonly floating?: boolean;
  readonly leaseHours?: number;
  readonly metadata?: Readonly<Record<string, string>>;
  /** 'hardware-id' (the default) or 'machine-key'. */
  readonly binding?: string;
}

export function parseLicenseType(type: string): LicenseType {
  if (!(LICENSE_TYPES as readonly string[]).includes(type)) {
    throw new LicenseServerError('INVALID_LICENSE_TYPE', `invalid license type ${describe(type)}`);
  }
  return type as LicenseType;
}

/** Parses the CLI's `CODE[:LIMIT]` form of an entitlement grant. */
export function parseEntitlementGrant(spec: string): EntitlementGrant {
  const separator = spec.lastIndexOf(':');
  const code = separator === -1 ? spec : spec.slice(0, separator);
  const limitText = separator === -1 ? undefined : spec.slice(separator + 1);
  parseEntitlementCode(code);
  if (limitText === undefined) return { code, usageLimit: null };
  return { code, usageLimit: parseUsageLimit(limitText, code) };
}

function parseUsageLimit(value: string | number | null, code: string): number | null {
  if (value === null) return null;
  const number = typeof value === 'number' ? value : /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(number) || number < 0) {
    throw new LicenseServerError('INVALID_INPUT', `usage limit of ${code} must be a non-negative integer, got ${describe(String(value))}`);
  }
  return number;
}

/** A new license's terms checked against each other and the clock, as a create stores them. */
export interface PreparedLicense {
  readonly type: LicenseType;
  readonly customerId: string;
  readonly validFrom: Date;
  readonly validUntil: Date;
  readonly grants: readonly EntitlementGrant[];
  readonly maxMachines: number | null;
  readonly floating: boolean;
  readonly leaseHours: number;
  readonly metadata: Record<string, string>;
  readonly withDecryptionKey: boolean;
  readonly binding: Binding;
}

/** Every check of a create that needs no database (the customer and entitlements are looked up by insertLicense). */
export function prepareLicense(input: NewLicense, at: Date): PreparedLicense {
  const type = parseLicenseType(input.type);
  const customerId = parseUuid(input.customerId, 'customer id');
  const validFrom = truncateToSeconds(input.validFrom === undefined ? at : toDate(input.validFrom, 'valid_from', false));
  const validUntil = truncateToSeconds(toDate(input.validUntil, 'valid_until', true));
  if (validUntil.getTime() <= at.getTime()) {
    throw new LicenseServerError('INVALID_VALIDITY', `valid_until ${validUntil.toISOString()} is in the past`);
  }
  if (validUntil.getTime() <= validFrom.getTime()) {
    throw new LicenseServerError('INVALID_VALIDITY', `valid_until ${validUntil.toISOString()} is not after valid_from ${validFrom.toISOString()}`);
  }
  const grants = input.entitlements ?? [];
  const seen = new Set<string>();
  for (const grant of grants) {
    parseEntitlementCode(grant.code);
    parseUsageLimit(grant.usageLimit, grant.code);
    if (seen.has(grant.code)) throw new LicenseServerError('INVALID_INPUT', `entitlement ${describe(grant.code)} is given twice`);
    seen.add(grant.code);
  }
  const maxMachines = input.maxMachines === undefined ? null : parseMaxMachines(input.maxMachines);
  const floating = input.floating ?? false;
  const leaseHours = parseLeaseHours(input.leaseHours ?? 1);
  const metadata = dropEmpty(parseMetadata(input.metadata ?? {}));
  if (floating && maxMachines === null) {
    throw new LicenseServerError('INVALID_INPUT', 'a floating license needs --max-machines: its seats are what the machines share');
  }
  const binding = input.binding === undefined ? 'hardware-id' : parseBinding(input.binding);
  return { type, customerId, validFrom, validUntil, grants, maxMachines, floating, leaseHours, metadata, withDecryptionKey: input.withDecryptionKey === true, binding };
}

export async function createLicense(db: Database, input: NewLicense, context: OperationContext): Promise<License> {
  const prepared = prepareLicense(input, now(context));
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await db.transaction((tx) => insertLicense(tx, prepared, context));
    } catch (error) {
      // A 140-bit key colliding is all but impossible; retrying costs nothing if it does.
      if (isUniqueViolation(error) && attempt < 3) continue;
      throw error;
    }
  }
}

/**
 * The rows, audit entry and event of one create, inside the caller's transaction:
 * createLicense's, or an import's, which creates every row of a file in one. The license
 * gets a new id and key, and a new decryption key when it is to have one.
 */
export async function insertLicense(tx: Queryable, prepared: PreparedLicense, context: OperationContext): Promise<License> {
  const { type, customerId, validFrom, validUntil, grants, maxMachines, floating, leaseHours, metadata, binding } = prepared;
  const id = randomUUID();
  const key = generateLicenseKey();
  const decryptionKey = prepared.withDecryptionKey ? randomBytes(32) : null;
  await getCustomer(tx, customerId);
  const resolved = [];
  for (const grant of grants) resolved.push({ entitlement: await getEntitlementByCode(tx, grant.code), usageLimit: grant.usageLimit });
  const stamp = now(context).toISOString();
  await tx.execute(
    `INSERT INTO licenses (id, license_key, customer_id, type, active, valid_from, valid_until, decryption_key,
       max_machines, floating, lease_hours, metadata, binding, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [id, key, customerId, type, true, validFrom.toISOString(), validUntil.toISOString(), decryptionKey,
      maxMachines, floating, leaseHours, JSON.stringify(metadata), binding, stamp, stamp],
  );
  for (const { entitlement, usageLimit } of resolved) {
    await tx.execute('INSERT INTO license_entitlements (license_id, entitlement_id, usage_limit) VALUES (?, ?, ?)', [
      id, entitlement.id, usageLimit,
    ]);
  }
  await recordAudit(tx, context, {
    action: 'license.created',
    entityType: 'license',
    entityId: id,
    details: {
      key_prefix: licenseKeyPrefix(key),
      customer_id: customerId,
      type,
      valid_from: validFrom.toISOString(),
      valid_until: validUntil.toISOString(),
      entitlements: grants.map((grant) => ({ code: grant.code, usage_limit: grant.usageLimit })),
      has_decryption_key: decryptionKey !== null,
      max_machines: maxMachines,
      floating,
      ...(floating ? { lease_hours: leaseHours } : {}),
      ...(Object.keys(metadata).length ? { metadata } : {}),
      ...(binding === 'hardware-id' ? {} : { binding }),
    },
  });
  const license = await getLicense(tx, id, { seatsAt: now(context) });
  await raiseEvent(tx, 'license.created', {
    ...licenseFields(license),
    type,
    valid_from: license.valid_from,
    max_machines: maxMachines,
    entitlements: license.entitlements.map((entitlement) => ({ code: entitlement.code, usage_limit: entitlement.usage_limit })),
    actor: context.actor,
  }, context);
  return license;
}

/** Empty values mean "remove" in an update; a new license simply does not store them. */
export function dropEmpty(metadata: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(metadata).filter(([, value]) => value !== ''));
}

export function toDate(value: Date | string, what: string, endOfDay: boolean): Date {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new LicenseServerError('INVALID_DATE', `${what} is not a valid date`);
    return value;
  }
  return parseTimestamp(value, what, { endOfDay });
}

const LICENSE_COLUMNS = `l.id, l.license_key, l.customer_id, c.name AS customer_name, c.active AS customer_active,
  l.type, l.active, l.valid_from, l.valid_until, l.decryption_key IS NOT NULL AS has_decryption_key,
  l.max_machines, l.floating, l.lease_hours, l.metadata, l.binding, l.created_at, l.updated_at`;
const LICENSE_FROM = 'FROM licenses l JOIN customers c ON c.id = l.customer_id';
const SELECT = `SELECT ${LICENSE_COLUMNS} ${LICENSE_FROM}`;
/**
 * Lists and counts read licenses alone and look each listed license's customer up by its key:
 * a join lets the planners start from the customers (SQLite after an ANALYZE scanned them all
 * and sorted the licenses; PostgreSQL put a scan of customers inside a nested loop), and the
 * filters need nothing of the customer but whether it is active (license-status.ts).
 */
const LIST_SELECT = `SELECT ${LICENSE_COLUMNS.replace('c.name AS customer_name, c.active AS customer_active', `${CUSTOMER_OF_LICENSE('name')} AS customer_name, ${CUSTOMER_OF_LICENSE('active')} AS customer_active`)} FROM licenses l`;

/**
 * Finds a license by its id or by its key (typed loosely: case, spaces and look-alikes
 * forgiven), with the machines holding a seat at `seatsAt` (default: now) counted, unless
 * `seats: false`: a query the validation hot path does without.
 */
export async function getLicense(db: Queryable, reference: string, options: { seatsAt?: Date; seats?: false; at?: Date } = {}): Promise<License> {
  const rows = await db.query(`${SELECT} WHERE ${licenseWhere(reference)}`, [licenseParam(reference)]);
  if (!rows[0]) throw licenseNotFound(reference);
  const at = options.at ?? options.seatsAt ?? new Date();
  const [license] = await withEntitlements(db, rows, at, options.seats === false ? undefined : (options.seatsAt ?? at));
  return license!;
}

/** The license's 32-byte decryption key, or null when it has none. Never log the result. */
export async function getLicenseDecryptionKey(db: Queryable, reference: string): Promise<Buffer | null> {
  const rows = await db.query(`SELECT decryption_key FROM licenses l WHERE ${licenseWhere(reference)}`, [licenseParam(reference)]);
  if (!rows[0]) throw licenseNotFound(reference);
  return asBytesOrNull(rows[0].decryption_key);
}

/** The filters of license-filters.ts and a page. */
export interface LicenseFilter extends Page, LicenseConditions {}

export const LICENSE_KEYSET: Keyset = {
  list: 'licenses',
  keys: [{ column: 'l.created_at', field: 'created_at', kind: 'timestamp' }, { column: 'l.id', field: 'id', kind: 'uuid' }],
};

/**
 * The SQL of one page of licenses, oldest first (so that pages stay stable while licenses
 * are added), with the filters of license-filters.ts evaluated at `at`; exported so that
 * test/lib/storage/list-plans.test.ts checks the plan of exactly what runs. Each filter has
 * an index that ends in the sort keys (migration 6), or picks out few enough rows to sort.
 */
export function licenseListQuery(filter: LicenseFilter = {}, at: Date = new Date()): PageQuery {
  const { where, params, filters } = filterWhere(filter, at);
  return pageQuery(LIST_SELECT, where, params, LICENSE_KEYSET, filters, filter);
}

export async function listLicensesPage(db: Queryable, filter: LicenseFilter = {}, seatsAt: Date = new Date()): Promise<ListPage<License>> {
  const query = licenseListQuery(filter, seatsAt);
  const page = pageRows(query, await db.query(query.sql, query.params));
  return { items: await withEntitlements(db, page.rows, seatsAt, seatsAt), next_cursor: page.next_cursor };
}

/** How many licenses the filter selects at `at` (exact up to paging.ts COUNT_BOUND). */
export async function countLicenses(db: Queryable, conditions: LicenseConditions = {}, at: Date = new Date(), bound?: number): Promise<ListCount> {
  const { where, params } = filterWhere(conditions, at);
  return countRows(db, 'FROM licenses l', where, params, bound);
}

/** One page of licenses, oldest first (see licenseListQuery). */
export async function listLicenses(db: Queryable, filter: LicenseFilter = {}, seatsAt: Date = new Date()): Promise<License[]> {
  return (await listLicensesPage(db, filter, seatsAt)).items;
}

/** Activates or deactivates; audited only when the state actually changes. */
export async function setLicenseActive(db: Database, reference: string, active: boolean, context: OperationContext): Promise<License> {
  return db.transaction(async (tx) => {
    const before = await getLicense(tx, reference, { seatsAt: now(context) });
    if (before.active === active) return before;
    await tx.execute('UPDATE licenses SET active = ?, updated_at = ? WHERE id = ?', [active, now(context).toISOString(), before.id]);
    await recordAudit(tx, context, {
      action: active ? 'license.activated' : 'license.deactivated',
      entityType: 'license',
      entityId: before.id,
    });
    const after = await getLicense(tx, before.id, { seatsAt: now(context) });
    if (!active) await raiseEvent(tx, 'license.deactivated', { ...licenseFields(after), actor: context.actor }, context);
    return after;
  });
}

/**
 * The license with this key plus one machine of it, and its decryption key, in one query:
 * online validation's hot path, where a round trip saved per request is most of what
 * tracking machines costs. The machine's columns come back as `m_<column>`.
 */
export async function getLicenseWithMachine(
  db: Queryable,
  key: string,
  hardwareId: string,
): Promise<{ license: License; machine: Row | undefined; decryptionKey: Buffer | null } | undefined> {
  const normalized = normalizeLicenseKey(key);
  if (!normalized) return undefined;
  const rows = await db.query(
    `SELECT ${LICENSE_COLUMNS}, l.decryption_key AS license_decryption_key, ${MACHINE_COLUMNS.map((column) => `m.${column} AS m_${column}`).join(', ')}
     ${LICENSE_FROM} LEFT JOIN machines m ON m.license_id = l.id AND m.hardware_id = ?
     WHERE l.license_key = ?`,
    [hardwareId, normalized],
  );
  const row = rows[0];
  if (!row) return undefined;
  const [license] = await withEntitlements(db, [row], new Date());
  const machine = row.m_id === null || row.m_id === undefined
    ? undefined
    : { ...Object.fromEntries(MACHINE_COLUMNS.map((column) => [column, row[`m_${column}`]])), floating: row.floating };
  return { license: license!, machine, decryptionKey: asBytesOrNull(row.license_decryption_key) };
}

/** The WHERE condition on `licenses l` that finds `reference`, an id or a key; bind licenseParam(reference). */
export function licenseWhere(reference: string): string {
  return isUuid(reference) ? 'l.id = ?' : 'l.license_key = ?';
}

/** What licenseWhere binds; INVALID_ID when the reference is neither an id nor a key. */
export function licenseParam(reference: string): string {
  if (isUuid(reference)) return reference.toLowerCase();
  const key = normalizeLicenseKey(reference);
  if (!key) {
    throw new LicenseServerError('INVALID_ID', `expected a license id (UUID) or a license key, got ${describeReference(reference)}`, {
      hint: 'Name a license by its id, a UUID such as 0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b, or by its key, seven groups of four characters such as 7KQ2-M9XD-1RTV-...',
    });
  }
  return key;
}

export function licenseNotFound(reference: string): LicenseServerError {
  return new LicenseServerError('LICENSE_NOT_FOUND', `no license matches ${describeReference(reference)}`);
}

/** Never echoes a whole license key back: error text can end up in logs. */
function describeReference(reference: string): string {
  if (isUuid(reference)) return `id ${reference.toLowerCase()}`;
  const key = normalizeLicenseKey(reference);
  if (key) return `the key ${licenseKeyPrefix(key)}...`;
  // A mistyped key is still nearly a key: show no more of it than a key's prefix, which
  // lists and the audit log show anyway.
  const shown = licenseKeyPrefix(reference);
  return shown.length === reference.length ? describe(reference) : `${describe(shown)} and ${reference.length - shown.length} more characters`;
}

const IN_CHUNK = 500;

async function withEntitlements(db: Queryable, rows: Row[], at: Date, seatsAt?: Date): Promise<License[]> {
  const byLicense = new Map<string, LicenseEntitlement[]>();
  const seats = new Map<string, number>();
  const ids = rows.map((row) => String(row.id));
  for (let i = 0; i < ids.length; i += IN_CHUNK) {
    const chunk = ids.slice(i, i + IN_CHUNK);
    const marks = chunk.map(() => '?').join(', ');
    const grants = await db.query(
      `SELECT le.license_id, e.code, e.name, le.usage_limit, le.used FROM license_entitlements le
       JOIN entitlements e ON e.id = le.entitlement_id WHERE le.license_id IN (${marks})`,
      chunk,
    );
    for (const grant of grants) {
      const list = byLicense.get(String(grant.license_id)) ?? [];
      const limit = asIntOrNull(grant.usage_limit);
      const used = asInt(grant.used);
      list.push({ code: String(grant.code), name: String(grant.name), usage_limit: limit, used, remaining: limit === null ? null : Math.max(0, limit - used) });
      byLicense.set(String(grant.license_id), list);
    }
    if (seatsAt) {
      const held = seatHeld(seatsAt);
      const counts = await db.query(
        `SELECT m.license_id, count(*) AS used FROM machines m JOIN licenses l ON l.id = m.license_id
         WHERE m.license_id IN (${marks}) AND ${held.sql} GROUP BY m.license_id`,
        [...chunk, ...held.params],
      );
      for (const count of counts) seats.set(String(count.license_id), Number(count.used));
    }
  }
  return rows.map((row) => {
    const key = String(row.license_key);
    const [active, customerActive, validFrom, validUntil] = [asBool(row.active), asBool(row.customer_active), asIso(row.valid_from), asIso(row.valid_until)];
    const entitlements = (byLicense.get(String(row.id)) ?? []).sort((a, b) => (a.code < b.code ? -1 : a.code > b.code ? 1 : 0));
    return {
      id: String(row.id),
      key,
      key_prefix: licenseKeyPrefix(key),
      customer_id: String(row.customer_id),
      customer_name: String(row.customer_name),
      customer_active: customerActive,
      type: String(row.type) as LicenseType,
      active,
      status: licenseStatus({ active, customer_active: customerActive, valid_from: validFrom, valid_until: validUntil }, at),
      valid_from: validFrom,
      valid_until: validUntil,
      has_decryption_key: asBool(row.has_decryption_key),
      max_machines: asIntOrNull(row.max_machines),
      floating: asBool(row.floating),
      lease_hours: asInt(row.lease_hours),
      ...(seatsAt ? { machines_in_use: seats.get(String(row.id)) ?? 0 } : {}),
      metadata: asJson(row.metadata) as Record<string, string>,
      binding: String(row.binding) as Binding,
      entitlements,
      created_at: asIso(row.created_at),
      updated_at: asIso(row.updated_at),
    };
  });
}
