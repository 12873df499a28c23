import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { parseEntitlementCode } from '../licensing/entitlements.js';
import { parseBinding, parseLeaseHours, parseMaxMachines, parseMetadata } from '../licensing/license-terms.js';
import { insertLicense, parseEntitlementGrant, parseLicenseType, prepareLicense, toDate, type EntitlementGrant, type NewLicense, type PreparedLicense } from '../licensing/licenses.js';
import type { Database, Queryable, SqlValue } from '../storage/types.js';
import { describe, isUuid } from '../validate.js';
import { finishImport, type ImportOptions, type ImportReport } from './run.js';
import { decodeImport, readImportTable, RowErrors, type ImportColumns, type ImportRow } from './table.js';

/**
 * The license export's columns. Read: the terms a create takes, `has_decryption_key` for its
 * `with_decryption_key`, and the customer by `customer_id`, `customer_email` (an import-only
 * column) or `customer_name`. Ignored: what the server assigns or counts, so an exported
 * file imports as new licenses, each with a new id, key and (when it has one) decryption key.
 */
export const LICENSE_IMPORT_COLUMNS: ImportColumns = {
  read: ['customer_id', 'customer_email', 'customer_name', 'type', 'valid_from', 'valid_until', 'has_decryption_key', 'max_machines', 'floating', 'lease_hours', 'metadata', 'binding', 'entitlements'],
  ignored: ['id', 'key', 'key_prefix', 'customer_active', 'active', 'status', 'machines_in_use', 'created_at', 'updated_at'],
  required: [['type'], ['valid_until'], ['customer_id', 'customer_email', 'customer_name']],
};

/** Values bound per statement when looking many rows up at once (SQLite allows 32,766). */
const LOOKUP_CHUNK = 500;

interface CustomerRow {
  readonly id: string;
  readonly name: string;
  readonly email: string | null;
}

/** Creates a license per row of a CSV file, all or none (docs/http-api.md, "CSV export and import"). */
export async function importLicenses(db: Database, file: Uint8Array | string, options: ImportOptions, context: OperationContext): Promise<ImportReport> {
  const table = readImportTable(decodeImport(file), LICENSE_IMPORT_COLUMNS);
  const at = now(context);
  const errors = new RowErrors();
  const terms = table.rows.map((row) => ({ row, terms: readTerms(row, errors) }));
  const customers = await customersNamed(db, table.rows);
  const known = await existingCodes(db, terms.flatMap(({ terms }) => (terms.entitlements ?? []).map((grant) => grant.code)));
  const checked: Array<{ line: number; prepared: PreparedLicense }> = [];
  for (const { row, terms: read } of terms) {
    const { line } = row;
    const customerId = resolveCustomer(row, customers, errors);
    for (const grant of read.entitlements ?? []) {
      if (!known.has(grant.code)) errors.add(line, 'entitlements', new LicenseServerError('ENTITLEMENT_NOT_FOUND', `no entitlement has the code ${describe(grant.code)}`));
    }
    if (errors.has(line) || customerId === undefined) continue;
    const prepared = errors.take(line, null, () => prepareLicense({ ...read, customerId } as NewLicense, at));
    if (prepared !== undefined) checked.push({ line, prepared });
  }
  return finishImport(db, 'licenses', checked, [...table.errors, ...errors.list], table.rows.length + table.errors.length, (tx, prepared) => insertLicense(tx, prepared, context), options);
}

type Terms = Partial<Omit<NewLicense, 'customerId'>>;

/** Each column parsed on its own, so that every column's error is reported; empty means the create's default. */
function readTerms({ line, values }: ImportRow, errors: RowErrors): Terms {
  const terms: Record<string, unknown> = {};
  const column = <T>(name: string, parse: (value: string) => T, field: keyof Terms) => {
    const value = values[name]!;
    if (value === '') return;
    const parsed = errors.take(line, name, () => parse(value));
    if (parsed !== undefined) terms[field] = parsed;
  };
  if (values.type === '') errors.add(line, 'type', new LicenseServerError('INVALID_LICENSE_TYPE', 'type is empty; it is time_based, usage_based or hybrid'));
  if (values.valid_until === '') errors.add(line, 'valid_until', new LicenseServerError('INVALID_DATE', 'valid_until is empty'));
  column('type', (value) => parseLicenseType(value.trim()), 'type');
  column('valid_from', (value) => toDate(value.trim(), 'valid_from', false), 'validFrom');
  column('valid_until', (value) => toDate(value.trim(), 'valid_until', true), 'validUntil');
  column('has_decryption_key', (value) => parseBoolean(value, 'has_decryption_key'), 'withDecryptionKey');
  column('max_machines', (value) => parseMaxMachines(value.trim()), 'maxMachines');
  column('floating', (value) => parseBoolean(value, 'floating'), 'floating');
  column('lease_hours', (value) => parseLeaseHours(value.trim()), 'leaseHours');
  column('metadata', parseMetadataCell, 'metadata');
  column('binding', (value) => parseBinding(value.trim()), 'binding');
  column('entitlements', parseEntitlementsCell, 'entitlements');
  return terms as Terms;
}

/** `true` or `false`, in any case (spreadsheets write TRUE and FALSE). */
function parseBoolean(value: string, name: string): boolean {
  const lower = value.trim().toLowerCase();
  if (lower === 'true') return true;
  if (lower === 'false') return false;
  throw new LicenseServerError('INVALID_INPUT', `${name} must be true or false, got ${describe(value)}`);
}

/** The export's form: a JSON object of strings, such as {"crm":"ACME-7"}. */
function parseMetadataCell(value: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new LicenseServerError('INVALID_INPUT', `metadata must be a JSON object of strings such as {"crm":"ACME-7"}, got ${describe(value)}`);
  }
  return parseMetadata(parsed);
}

/**
 * The export's form, a JSON array of objects of which `code` and `usage_limit` are read (an
 * exported `name`, `used` and `remaining` are what the server keeps); or the command line's
 * `CODE[:LIMIT]`, several separated by spaces or semicolons: `seats:25; reports.export`.
 */
function parseEntitlementsCell(value: string): EntitlementGrant[] {
  if (!value.trimStart().startsWith('[')) return value.split(/[\s;]+/).filter((part) => part !== '').map(parseEntitlementGrant);
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new LicenseServerError('INVALID_INPUT', 'entitlements starts with "[" but is not a JSON array; write CODE[:LIMIT] separated by ";", or the export\'s JSON');
  }
  return (parsed as unknown[]).map((item) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item) || typeof (item as { code?: unknown }).code !== 'string') {
      throw new LicenseServerError('INVALID_INPUT', 'each entitlement of the JSON array must be an object with a "code"');
    }
    const { code, usage_limit: limit } = item as { code: string; usage_limit?: unknown };
    parseEntitlementCode(code);
    if (limit !== undefined && limit !== null && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 0)) {
      throw new LicenseServerError('INVALID_INPUT', `usage limit of ${code} must be a non-negative integer or null, got ${describe(limit)}`);
    }
    return { code, usageLimit: (limit ?? null) as number | null };
  });
}

/**
 * The row's customer: by customer_id when it is given, else by customer_email, else by
 * customer_name (each as stored, case and all), which must name one customer only. Every one
 * of the three that is given must agree with the customer found. Errors go to the column at
 * fault; undefined when there is one.
 */
function resolveCustomer({ line, values }: ImportRow, customers: Map<string, CustomerRow[]>, errors: RowErrors): string | undefined {
  const given = { id: values.customer_id!.trim(), email: values.customer_email!.trim(), name: values.customer_name!.trim() };
  const by = given.id !== '' ? 'id' : given.email !== '' ? 'email' : given.name !== '' ? 'name' : undefined;
  const fail = (key: 'id' | 'email' | 'name', error: LicenseServerError) => {
    errors.add(line, `customer_${key}`, error);
    return undefined;
  };
  if (by === undefined) return fail('id', new LicenseServerError('INVALID_INPUT', 'the row names no customer: give customer_id, customer_email or customer_name'));
  if (by === 'id' && !isUuid(given.id)) return fail('id', new LicenseServerError('INVALID_ID', `customer_id must be a UUID, got ${describe(given.id)}`));
  const matches = customers.get(`${by}:${by === 'id' ? given.id.toLowerCase() : given[by]}`) ?? [];
  if (matches.length === 0) return fail(by, new LicenseServerError('CUSTOMER_NOT_FOUND', `no customer has the ${by} ${describe(given[by])}`));
  if (matches.length > 1) return fail(by, new LicenseServerError('INVALID_INPUT', `${matches.length} customers have the ${by} ${describe(given[by])}; name the customer by customer_id`));
  const found = matches[0]!;
  for (const key of ['email', 'name'] as const) {
    if (given[key] !== '' && found[key] !== given[key]) {
      return fail(key, new LicenseServerError('INVALID_INPUT', `customer_${key} ${describe(given[key])} is not the ${key} of customer ${found.id} (${describe(found[key])}); leave one of them empty`));
    }
  }
  return found.id;
}

/** The customers the rows name, looked up a few hundred at a time, keyed `id:`, `email:` and `name:`. */
async function customersNamed(db: Queryable, rows: readonly ImportRow[]): Promise<Map<string, CustomerRow[]>> {
  const found = new Map<string, CustomerRow[]>();
  const distinct = (column: string, normalise: (value: string) => string) => [...new Set(rows.map((row) => normalise(row.values[column]!)))].filter((value) => value !== '');
  const lookups: Array<[key: 'id' | 'email' | 'name', values: string[]]> = [
    ['id', distinct('customer_id', (value) => value.trim().toLowerCase()).filter(isUuid)],
    ['email', distinct('customer_email', (value) => value.trim())],
    ['name', distinct('customer_name', (value) => value.trim())],
  ];
  for (const [key, values] of lookups) {
    for (let i = 0; i < values.length; i += LOOKUP_CHUNK) {
      const chunk = values.slice(i, i + LOOKUP_CHUNK);
      const result = await db.query(`SELECT id, name, email FROM customers WHERE ${key} IN (${chunk.map(() => '?').join(', ')})`, chunk as SqlValue[]);
      for (const row of result) {
        const customer: CustomerRow = { id: String(row.id), name: String(row.name), email: row.email === null || row.email === undefined ? null : String(row.email) };
        const entry = `${key}:${customer[key]}`;
        found.set(entry, [...(found.get(entry) ?? []), customer]);
      }
    }
  }
  return found;
}

async function existingCodes(db: Queryable, codes: readonly string[]): Promise<Set<string>> {
  const distinct = [...new Set(codes)];
  const known = new Set<string>();
  for (let i = 0; i < distinct.length; i += LOOKUP_CHUNK) {
    const chunk = distinct.slice(i, i + LOOKUP_CHUNK);
    for (const row of await db.query(`SELECT code FROM entitlements WHERE code IN (${chunk.map(() => '?').join(', ')})`, chunk)) known.add(String(row.code));
  }
  return known;
}
