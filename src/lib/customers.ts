import { randomUUID } from 'node:crypto';
import { recordAudit } from './audit.js';
import { now, type OperationContext } from './context.js';
import { LicenseServerError } from './errors.js';
import type { Keyset } from './cursor.js';
import { pageQuery, fetchPage, type ListPage, type Page, type PageQuery } from './paging.js';
import type { Database, Queryable, Row } from './storage/types.js';
import { asBool, asIso } from './storage/values.js';
import { parseUuid, requireNonEmpty } from './validate.js';

export interface Customer {
  readonly id: string;
  readonly name: string;
  readonly active: boolean;
  readonly created_at: string;
  readonly updated_at: string;
}

const COLUMNS = 'id, name, active, created_at, updated_at';

export async function createCustomer(db: Database, input: { name: string }, context: OperationContext): Promise<Customer> {
  const name = requireNonEmpty(input.name, 'customer name');
  const at = now(context).toISOString();
  const id = randomUUID();
  return db.transaction(async (tx) => {
    await tx.execute('INSERT INTO customers (id, name, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?)', [
      id, name, true, at, at,
    ]);
    await recordAudit(tx, context, { action: 'customer.created', entityType: 'customer', entityId: id, details: { name } });
    return getCustomer(tx, id);
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
    created_at: asIso(row.created_at),
    updated_at: asIso(row.updated_at),
  };
}
