import type { OperationContext } from './context.js';
import { now } from './context.js';
import { pageSql } from './paging.js';
import type { Database, Queryable, SqlValue } from './storage/types.js';
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

export interface AuditFilter {
  readonly action?: string;
  readonly actor?: string;
  readonly entityType?: string;
  readonly entityId?: string;
  readonly since?: Date;
  readonly until?: Date;
  /** 100 when left out. */
  readonly limit?: number;
  readonly offset?: number;
}

/** Newest first. */
export async function listAudit(db: Queryable, filter: AuditFilter = {}): Promise<AuditEntry[]> {
  const where: string[] = [];
  const params: SqlValue[] = [];
  const add = (clause: string, value: SqlValue | undefined) => {
    if (value === undefined) return;
    where.push(clause);
    params.push(value);
  };
  add('action = ?', filter.action);
  add('actor = ?', filter.actor);
  add('entity_type = ?', filter.entityType);
  add('entity_id = ?', filter.entityId);
  add('occurred_at >= ?', filter.since?.toISOString());
  add('occurred_at < ?', filter.until?.toISOString());
  const sql = `SELECT id, occurred_at, actor, action, entity_type, entity_id, details FROM audit_log
    ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC ${pageSql({ limit: filter.limit ?? 100, offset: filter.offset })}`;
  const rows = await db.query(sql, params);
  return rows.map((row) => ({
    id: asInt(row.id),
    occurred_at: asIso(row.occurred_at),
    actor: String(row.actor),
    action: String(row.action),
    entity_type: String(row.entity_type),
    entity_id: row.entity_id === null ? null : String(row.entity_id),
    details: asJson(row.details),
  }));
}
