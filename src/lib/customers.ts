import { randomUUID } from 'node:crypto';
import { recordAudit } from './audit.js';
import { now, type OperationContext } from './context.js';
import { LicenseServerError } from './errors.js';
import type { Keyset } from './cursor.js';
import { pageQuery, fetchPage, type ListPage, type Page, type PageQuery } from './paging.js';
import type { Database, Queryable, Row } from './storage/types.js';
import { asBool, asIso } from './storage/values.js';
import { describe, parseUuid, requireNonEmpty } from './validate.js';

export interface Customer {
  readonly id: string;
  readonly name: string;
  readonly active: boolean;
  /** Where rules sending to `customer` send its notifications (expiring-soon reminders); null: none. */
  readonly email: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

const COLUMNS = 'id, name, active, email, created_at, updated_at';

/** The longest email address SMTP carries (RFC 5321: 64 + 1 + 255). */
const MAX_EMAIL_LENGTH = 320;

/**
 * One plain address, `local@domain`: no display name, no list, no whitespace or control
 * character, so that it can only ever be one recipient and never start a header of its own.
 */
export function parseCustomerEmail(value: string): string {
  if (value.length > MAX_EMAIL_LENGTH || !/^[^\s\u0000-\u001f\u007f@,;<>"()[\]\\]+@[^\s\u0000-\u001f\u007f@,;<>"()[\]\\]+$/.test(value)) {
    throw new LicenseServerError('INVALID_INPUT', `email must be one plain address such as billing@example.com, at most ${MAX_EMAIL_LENGTH} characters, got ${describe(value)}`);
  }
  return value;
}

/** An empty email means none. */
function emailOrNull(value: string | null | undefined): string | null {
  return value === undefined || value === null || value === '' ? null : parseCustomerEmail(value);
}

export interface NewCustomer {
  readonly name: string;
  readonly email?: string | null;
}

/** A new customer's fields checked, as a create stores them. */
export interface PreparedCustomer {
  readonly name: string;
  readonly email: string | null;
}

export function prepareCustomer(input: NewCustomer): PreparedCustomer {
  return { name: checkCustomerName(input.name), email: checkCustomerEmail(input.email) };
}

/** The name alone checked, for callers that report each field's error apart (a CSV import). */
export function checkCustomerName(name: string): string {
  return requireNonEmpty(name, 'customer name');
}

/** The email alone checked: '', null and undefined mean none. */
export function checkCustomerEmail(email: string | null | undefined): string | null {
  return emailOrNull(email);
}

export async function createCustomer(db: Database, input: NewCustomer, context: OperationContext): Promise<Customer> {
  const prepared = prepareCustomer(input);
  return db.transaction((tx) => insertCustomer(tx, prepared, context));
}

/**
 * The rows and audit entry of one create, inside the caller's transaction: createCustomer's,
 * or an import's, which creates every row of a file in one.
 */
export async function insertCustomer(tx: Queryable, customer: PreparedCustomer, context: OperationContext): Promise<Customer> {
  const { name, email } = customer;
  const at = now(context).toISOString();
  const id = randomUUID();
  await tx.execute('INSERT INTO customers (id, name, active, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)', [
    id, name, true, email, at, at,
  ]);
  await recordAudit(tx, context, { action: 'customer.created', entityType: 'customer', entityId: id, details: { name, ...(email === null ? {} : { email }) } });
  return getCustomer(tx, id);
}

export interface CustomerUpdate {
  readonly name?: string;
  /** null or '' removes the address. */
  readonly email?: string | null;
}

/** Changes a customer's name or contact email; audited with what changed, when anything did. */
export async function updateCustomer(db: Database, id: string, update: CustomerUpdate, context: OperationContext): Promise<Customer> {
  const customerId = parseUuid(id, 'customer id');
  const name = update.name === undefined ? undefined : requireNonEmpty(update.name, 'customer name');
  const email = update.email === undefined ? undefined : emailOrNull(update.email);
  return db.transaction(async (tx) => {
    const before = await getCustomer(tx, customerId);
    const changes: Record<string, { before: unknown; after: unknown }> = {};
    if (name !== undefined && name !== before.name) changes.name = { before: before.name, after: name };
    if (email !== undefined && email !== before.email) changes.email = { before: before.email, after: email };
    if (Object.keys(changes).length === 0) return before;
    await tx.execute('UPDATE customers SET name = ?, email = ?, updated_at = ? WHERE id = ?', [
      name ?? before.name, email === undefined ? before.email : email, now(context).toISOString(), customerId,
    ]);
    await recordAudit(tx, context, { action: 'customer.updated', entityType: 'customer', entityId: customerId, details: { changes } });
    return getCustomer(tx, customerId);
  });
}

export async function getCustomer(db: Queryable, id: string): Promise<Customer> {
  const customerId = parseUuid(id, 'customer id');
  const rows = await db.query(`SELECT ${COLUMNS} FROM customers WHERE id = ?`, [customerId]);
  if (!rows[0]) throw new LicenseServerError('CUSTOMER_NOT_FOUND', `no customer has id ${customerId}`);
  return toCustomer(rows[0]);
}

export interface CustomerFilter extends Page {
  readonly active?: boolean;
}

export const CUSTOMER_KEYSET: Keyset = {
  list: 'customers',
  keys: [{ column: 'created_at', field: 'created_at', kind: 'timestamp' }, { column: 'id', field: 'id', kind: 'uuid' }],
};

/** One page of customers, oldest first, so that pages stay stable while customers are added. */
export function customerListQuery(filter: CustomerFilter = {}): PageQuery {
  const where = filter.active === undefined ? [] : ['active = ?'];
  const params = filter.active === undefined ? [] : [filter.active];
  return pageQuery(`SELECT ${COLUMNS} FROM customers`, where, params, CUSTOMER_KEYSET, { active: filter.active }, filter);
}

export async function listCustomersPage(db: Queryable, filter: CustomerFilter = {}): Promise<ListPage<Customer>> {
  return fetchPage(db, customerListQuery(filter), toCustomer);
}

export async function listCustomers(db: Queryable, filter: CustomerFilter = {}): Promise<Customer[]> {
  return (await listCustomersPage(db, filter)).items;
}

/** Activates or deactivates; audited only when the state actually changes. */
export async function setCustomerActive(db: Database, id: string, active: boolean, context: OperationContext): Promise<Customer> {
  const customerId = parseUuid(id, 'customer id');
  return db.transaction(async (tx) => {
    const before = await getCustomer(tx, customerId);
    if (before.active === active) return before;
    await tx.execute('UPDATE customers SET active = ?, updated_at = ? WHERE id = ?', [active, now(context).toISOString(), customerId]);
    await recordAudit(tx, context, {
      action: active ? 'customer.activated' : 'customer.deactivated',
      entityType: 'customer',
      entityId: customerId,
    });
    return getCustomer(tx, customerId);
  });
}

function toCustomer(row: Row): Customer {
  return {
    id: String(row.id),
    name: String(row.name),
    active: asBool(row.active),
    email: row.email === null || row.email === undefined ? null : String(row.email),
    created_at: asIso(row.created_at),
    updated_at: asIso(row.updated_at),
  };
}
