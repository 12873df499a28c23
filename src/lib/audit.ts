import type { OperationContext } from './context.js';
import { now } from './context.js';
import type { Keyset, ListFilters } from './cursor.js';
import { countRows, pageQuery, fetchPage, unindexedText, type ListCount, type ListPage, type Page, type PageQuery } from './paging.js';
import type { Database, Queryable, Row, SqlValue } from './storage/types.js';
import { asInt, asIso, asJson } from './storage/values.js';

export interface AuditEntry {
  readonly id: number;
  readonly occurred_at: string;
  readonly actor: string;
  readonly action: string;
  readonly entity_type: string;
  readonly entity_id: string | null;
  readonly details: Record<string, unknown>;
}

export interface AuditEvent {
  readonly action: string;
  readonly entityType: string;
  readonly entityId?: string | null;
  /** Never key material, tokens or license keys: the audit log is readable by every admin. */
  readonly details?: Record<string, unknown>;
}

/** Appends one entry; call it inside the transaction that makes the change it records. */
export async function recordAudit(tx: Queryable, context: OperationContext, event: AuditEvent): Promise<void> {
  await tx.execute(
    'INSERT INTO audit_log (occurred_at, actor, action, entity_type, entity_id, details) VALUES (?, ?, ?, ?, ?, ?)',
    [
      now(context).toISOString(),
      context.actor,
      event.action,
      event.entityType,
      event.entityId ?? null,
      JSON.stringify(event.details ?? {}),
    ],
  );
}

/**
 * Appends one entry in a transaction of its own: for access that changes nothing but must
 * leave a trace (a backup downloaded or checked), and for an attempt that failed.
 */
export async function appendAudit(db: Database, context: OperationContext, event: AuditEvent): Promise<void> {
  await db.transaction((tx) => recordAudit(tx, context, event));
}

export interface AuditFilter extends Page {
  readonly action?: string;
  readonly actor?: string;
  readonly entityType?: string;
  readonly entityId?: string;
  readonly since?: Date;
  readonly until?: Date;
}

/**
 * Newest first, by when it happened: `occurred_at DESC, id DESC`, which every filter's index
 * ends in (migration 6), so that a page and a --since/--until range are read from an index
 * instead of sorting the log. (Ordered by id alone, SQLite would not use the occurred_at
 * index for a time range.)
 */
export const AUDIT_KEYSET: Keyset = {
  list: 'audit',
  keys: [{ column: 'occurred_at', field: 'occurred_at', kind: 'timestamp' }, { column: 'id', field: 'id', kind: 'integer' }],
  descending: true,
};

export function auditListQuery(filter: AuditFilter = {}): PageQuery {
  const { where, params, filters } = auditWhere(filter);
  return pageQuery('SELECT id, occurred_at, actor, action, entity_type, entity_id, details FROM audit_log', where, params, AUDIT_KEYSET, filters, filter);
}

/** How many entries the filter selects (exact up to paging.ts COUNT_BOUND). */
export async function countAudit(db: Queryable, filter: Omit<AuditFilter, keyof Page> = {}, bound?: number): Promise<ListCount> {
  const { where, params } = auditWhere(filter);
  return countRows(db, 'FROM audit_log', where, params, bound);
}

function auditWhere(filter: Omit<AuditFilter, keyof Page>): { where: string[]; params: SqlValue[]; filters: ListFilters } {
  const where: string[] = [];
  const params: SqlValue[] = [];
  const add = (clause: string, value: SqlValue | undefined) => {
    if (value === undefined) return;
    where.push(clause);
    params.push(value);
  };
  const since = filter.since?.toISOString();
  const until = filter.until?.toISOString();
  // One entity has a few entries: read them by its index, the other filters checked per row.
  const column = (name: string) => (filter.entityId !== undefined ? unindexedText(name) : name);
  add(`${column('action')} = ?`, filter.action);
  add(`${column('actor')} = ?`, filter.actor);
  add(`${column('entity_type')} = ?`, filter.entityType);
  add('entity_id = ?', filter.entityId);
  add('occurred_at >= ?', since);
  add('occurred_at < ?', until);
  const filters = { action: filter.action, actor: filter.actor, entity_type: filter.entityType, entity_id: filter.entityId, since, until };
  return { where, params, filters };
}

export async function listAuditPage(db: Queryable, filter: AuditFilter = {}): Promise<ListPage<AuditEntry>> {
  return fetchPage(db, auditListQuery(filter), toAuditEntry);
}

/** One page (100 entries when no limit is given), newest first. */
export async function listAudit(db: Queryable, filter: AuditFilter = {}): Promise<AuditEntry[]> {
  return (await listAuditPage(db, filter)).items;
}

function toAuditEntry(row: Row): AuditEntry {
  return {
    id: asInt(row.id),
    occurred_at: asIso(row.occurred_at),
    actor: String(row.actor),
    action: String(row.action),
    entity_type: String(row.entity_type),
    entity_id: row.entity_id === null ? null : String(row.entity_id),
    details: asJson(row.details),
  };
}
