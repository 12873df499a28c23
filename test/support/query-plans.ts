import { randomBytes, randomUUID } from 'node:crypto';
import type { Database, Queryable, SqlValue } from '../../src/lib/storage/types.js';

/**
 * Stores big enough that a planner prefers an index wherever one fits, and the plan checks
 * that say when a list query reads a whole big table or sorts it.
 */

export interface FilledStore {
  readonly customerIds: string[];
  readonly licenseIds: string[];
  /** A license with many usage records. */
  readonly usageLicenseId: string;
  readonly startedAt: number;
}

export const SIZES = { customers: 4_000, licenses: 20_000, machines: 20_000, audit: 50_000, usage: 10_000, deliveries: 20_000 };

/** Tables whose full scan or sort a list must never need. */
export const BIG_TABLES = ['customers', 'licenses', 'machines', 'audit_log', 'usage_records', 'notification_deliveries'];

const ACTIONS = ['license.created', 'license.checked_out', 'customer.created', 'machine.activated', 'license.renewed', 'token.created', 'backup.created', 'license.updated'];
const ACTORS = ['cli:alice', 'cli:bob', 'token:deploy', 'token:ci', 'client:127.0.0.1'];
const ENTITY_TYPES = ['license', 'customer', 'machine', 'admin_token', 'backup'];
const EVENTS = ['license.checked_out', 'backup.succeeded', 'license.created', 'machine.activated', 'license.expiring_soon'];
// Mostly delivered, as a working outbox is: a few pending, fewer failed.
const DELIVERY_STATUSES = [...Array<string>(17).fill('delivered'), 'pending', 'pending', 'failed'];

async function insertMany(tx: Queryable, table: string, columns: readonly string[], rows: SqlValue[][]): Promise<void> {
  const perStatement = Math.floor(30_000 / columns.length);
  for (let i = 0; i < rows.length; i += perStatement) {
    const chunk = rows.slice(i, i + perStatement);
    const marks = chunk.map(() => `(${columns.map(() => '?').join(', ')})`).join(', ');
    await tx.execute(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${marks}`, chunk.flat());
  }
}

/** Fills a migrated, empty store in one transaction, then has the engine gather statistics. */
export async function fillStore(db: Database): Promise<FilledStore> {
  const startedAt = Date.parse('2025-01-01T00:00:00.000Z');
  const at = (i: number) => new Date(startedAt + i * 1_000).toISOString();
  const customerIds = Array.from({ length: SIZES.customers }, () => randomUUID());
  const licenseIds = Array.from({ length: SIZES.licenses }, () => randomUUID());
  const entitlementId = randomUUID();
  const usageLicenseId = licenseIds[7]!;
  await db.transaction(async (tx) => {
    await insertMany(tx, 'customers', ['id', 'name', 'active', 'created_at', 'updated_at'],
      customerIds.map((id, i) => [id, `customer ${i}`, i % 10 !== 0, at(i), at(i)]));
    await insertMany(tx, 'entitlements', ['id', 'code', 'name', 'created_at'], [[entitlementId, 'export', 'Export', at(0)]]);
    await insertMany(tx, 'licenses', ['id', 'license_key', 'customer_id', 'type', 'active', 'valid_from', 'valid_until', 'created_at', 'updated_at'],
      licenseIds.map((id, i) => [
        id, `KEY-${randomBytes(12).toString('hex')}`, customerIds[i % customerIds.length]!, ['time_based', 'usage_based', 'hybrid'][i % 3]!,
        i % 7 !== 0, at(0), at(10_000_000), at(i * 2), at(i * 2),
      ]));
    await insertMany(tx, 'machines', ['id', 'license_id', 'hardware_id', 'active', 'first_seen', 'last_seen', 'lease_expires_at'],
      Array.from({ length: SIZES.machines }, (_, i) => [
        randomUUID(), licenseIds[i % licenseIds.length]!, `hw-${i}`, i % 5 !== 0, at(i * 3), at(i * 3), i % 4 === 0 ? at(10_000_000) : null,
      ]));
    await insertMany(tx, 'audit_log', ['occurred_at', 'actor', 'action', 'entity_type', 'entity_id', 'details'],
      Array.from({ length: SIZES.audit }, (_, i) => [
        at(i), ACTORS[i % ACTORS.length]!, ACTIONS[i % ACTIONS.length]!, ENTITY_TYPES[i % ENTITY_TYPES.length]!, licenseIds[i % licenseIds.length]!, '{}',
      ]));
    await insertMany(tx, 'usage_records', ['id', 'license_id', 'entitlement_id', 'idempotency_key', 'hardware_id', 'quantity', 'occurred_at', 'recorded_at'],
      Array.from({ length: SIZES.usage }, (_, i) => [
        randomUUID(), i % 2 === 0 ? usageLicenseId : licenseIds[i % licenseIds.length]!, entitlementId, `k-${i}`, 'hw-1', 1, at(i), at(i),
      ]));
    await insertMany(tx, 'notification_deliveries', ['id', 'event_id', 'event', 'occurred_at', 'data', 'channel', 'target', 'status', 'attempts', 'next_attempt_at', 'retry_from', 'created_at'],
      Array.from({ length: SIZES.deliveries }, (_, i) => [
        randomUUID(), randomUUID(), EVENTS[i % EVENTS.length]!, at(i), '{}', i % 4 === 0 ? 'email' : 'webhook', i % 4 === 0 ? 'ops@example.com' : 'ops',
        DELIVERY_STATUSES[i % DELIVERY_STATUSES.length]!, 1, at(i + 30), at(i), at(i),
      ]));
  }, { unbounded: true });
  return { customerIds, licenseIds, usageLicenseId, startedAt };
}

/** The plan's lines (SQLite) or nodes (PostgreSQL), as text, for messages. */
export async function explain(db: Queryable & { engine: Database['engine'] }, sql: string, params: readonly SqlValue[]): Promise<string[]> {
  if (db.engine === 'sqlite') {
    const rows = await db.query(`EXPLAIN QUERY PLAN ${sql}`, params);
    return rows.map((row) => String(row.detail));
  }
  const rows = await db.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  const plan = rows[0]!['QUERY PLAN'] as Array<{ Plan: PgNode }>;
  const lines: string[] = [];
  const walk = (node: PgNode, depth: number) => {
    lines.push(`${'  '.repeat(depth)}${node['Node Type']}${node['Relation Name'] ? ` on ${node['Relation Name']}` : ''}${node['Index Name'] ? ` using ${node['Index Name']}` : ''} (rows ${node['Plan Rows']})`);
    for (const child of node.Plans ?? []) walk(child, depth + 1);
  };
  walk(plan[0]!.Plan, 0);
  return lines;
}

interface PgNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Plan Rows': number;
  readonly Plans?: PgNode[];
}

/** The aliases the list queries give tables: SQLite's plans name a table by its alias. */
const ALIASES: Readonly<Record<string, string>> = { l: 'licenses', c: 'customers', m: 'machines', u: 'usage_records', e: 'entitlements' };

/**
 * A sort of at most this many rows (by the planner's estimate) is of the few rows an index
 * picked out (PostgreSQL sorts a customer's five licenses read through a bitmap rather than
 * walk the index in order); what must not come back is a sort of a table.
 */
export const SMALL_SORT_ROWS = 1_000;

/** The lines of a plan that read a big table whole or sort many rows: what a list query must not do. */
export function planProblems(engine: Database['engine'], lines: readonly string[]): string[] {
  return lines.filter((line) => {
    const text = line.trim();
    if (engine === 'sqlite') {
      if (/USE TEMP B-TREE/.test(text)) return true;
      const scan = /^SCAN (\w+)(?: AS \w+)?(.*)$/.exec(text);
      if (!scan) return false;
      return BIG_TABLES.includes(ALIASES[scan[1]!] ?? scan[1]!) && !/USING (COVERING )?INDEX/.test(scan[2]!);
    }
    const sort = /^(Sort|Incremental Sort)\b.*\(rows (\d+)\)/.exec(text);
    if (sort) return Number(sort[2]) > SMALL_SORT_ROWS;
    const seq = /^Seq Scan on (\w+)/.exec(text);
    return seq !== null && BIG_TABLES.includes(seq[1]!);
  });
}
