import { randomUUID } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import type { Keyset } from '../cursor.js';
import { pageQuery, fetchPage, type ListPage, type Page, type PageQuery } from '../paging.js';
import { isUniqueViolation } from '../storage/errors.js';
import type { Database, Queryable, Row } from '../storage/types.js';
import { asIso } from '../storage/values.js';
import { describe, requireNonEmpty } from '../validate.js';

export interface Entitlement {
  readonly id: string;
  readonly code: string;
  readonly name: string;
  readonly created_at: string;
}

/** Codes appear in `CODE:LIMIT` flags, URLs and license files, hence the narrow alphabet. */
const CODE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export function parseEntitlementCode(code: string): string {
  if (typeof code !== 'string' || !CODE.test(code)) {
    throw new LicenseServerError('INVALID_ENTITLEMENT_CODE', `invalid entitlement code ${describe(code)}`);
  }
  return code;
}

export async function createEntitlement(
  db: Database,
  input: { code: string; name: string },
  context: OperationContext,
): Promise<Entitlement> {
  const code = parseEntitlementCode(input.code);
  const name = requireNonEmpty(input.name, 'entitlement name');
  const id = randomUUID();
  try {
    return await db.transaction(async (tx) => {
      await tx.execute('INSERT INTO entitlements (id, code, name, created_at) VALUES (?, ?, ?, ?)', [
        id, code, name, now(context).toISOString(),
      ]);
      await recordAudit(tx, context, { action: 'entitlement.created', entityType: 'entitlement', entityId: id, details: { code, name } });
      return getEntitlementByCode(tx, code);
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new LicenseServerError('ENTITLEMENT_CODE_EXISTS', `an entitlement with code ${describe(code)} already exists`);
    }
    throw error;
  }
}

export async function getEntitlementByCode(db: Queryable, code: string): Promise<Entitlement> {
  const rows = await db.query('SELECT id, code, name, created_at FROM entitlements WHERE code = ?', [parseEntitlementCode(code)]);
  if (!rows[0]) throw new LicenseServerError('ENTITLEMENT_NOT_FOUND', `no entitlement has code ${describe(code)}`);
  return toEntitlement(rows[0]);
}

/** By code, which is unique and indexed: the keyset is the code alone. */
export const ENTITLEMENT_KEYSET: Keyset = { list: 'entitlements', keys: [{ column: 'code', field: 'code', kind: 'text' }] };

export function entitlementListQuery(page: Page = {}): PageQuery {
  return pageQuery('SELECT id, code, name, created_at FROM entitlements', [], [], ENTITLEMENT_KEYSET, {}, page);
}

export async function listEntitlementsPage(db: Queryable, page: Page = {}): Promise<ListPage<Entitlement>> {
  return fetchPage(db, entitlementListQuery(page), toEntitlement);
}

export async function listEntitlements(db: Queryable, page: Page = {}): Promise<Entitlement[]> {
  return (await listEntitlementsPage(db, page)).items;
}

function toEntitlement(row: Row): Entitlement {
  return { id: String(row.id), code: String(row.code), name: String(row.name), created_at: asIso(row.created_at) };
}
