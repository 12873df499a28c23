import { countAttentionLists, type AttentionListName } from '../attention-counts.js';
import { TRIGGERS, type Trigger } from '../backup/archive/manifest.js';
import { seatHeld } from '../licensing/machines.js';
import { findSigningKey } from '../signing-keys/keys.js';
import type { Database, Queryable } from '../storage/types.js';
import { asIso, asIsoOrNull, asJson } from '../storage/values.js';

/**
 * Figures that describe the shared database, not the process that reads them: every daemon
 * on one store reports the same ones (docs/metrics.md). Each is a total or one value per
 * member of a fixed set (backup triggers, configured targets, delivery statuses), never one
 * per license, customer or machine, so that their number stays bounded whatever the data.
 */
export interface StoreFigures {
  /** Machines holding a seat now (the rule in licensing/machines.ts). */
  readonly seatsInUse: number;
  readonly machines: { readonly active: number; readonly deactivated: number };
  /** Active licenses with max_machines whose seats in use are at least NEAR_LIMIT of it. */
  readonly licensesNearMachineLimit: number;
  readonly backups: Readonly<Record<Trigger, BackupFigures>>;
  /** Per configured off-site target. */
  readonly copies: ReadonlyMap<string, CopyFigures>;
  readonly deliveries: { readonly pending: number; readonly delivered: number; readonly failed: number };
  /**
   * The counts of GET /api/attention (attention-counts.ts), by the same queries, exact
   * whatever their size: licenses expiring, expired, at their machine limit, with high usage;
   * deliveries failed and retrying.
   */
  readonly attention: Readonly<Record<AttentionListName, number>>;
  /** Undefined before the first key exists. */
  readonly signingKey: { readonly ageSeconds: number; readonly sealed: boolean } | undefined;
}

export interface BackupFigures {
  /** The newest good backup's time (its `created_at`, when it started), seconds since 1970. */
  readonly lastSuccess: number | undefined;
  /** When the newest failed attempt failed, seconds since 1970. */
  readonly lastFailure: number | undefined;
  /** From the newest good backup's start to its audit entry (made once it was verified). */
  readonly lastDurationSeconds: number | undefined;
  readonly lastSizeBytes: number | undefined;
}

export interface CopyFigures {
  /** When the target last took a copy. */
  readonly lastSuccess: number | undefined;
  /** The newest failed attempt among copies not made yet. */
  readonly lastFailure: number | undefined;
  readonly pending: number;
  readonly copied: number;
  readonly failed: number;
}

/** A bound no count reaches: the figures are exact, read in the background where time does not matter. */
const EXACT = Number.MAX_SAFE_INTEGER - 1;

/** "Near" the machine limit: 90 % of max_machines or more. */
export const NEAR_LIMIT = 0.9;

/**
 * One statement after the other, never several at once: on PostgreSQL the read takes one
 * connection of the admin pool, not both (storage/admin-databases.ts). It runs in the
 * background (store-figures-cache.ts), so its own latency does not matter.
 */
export async function readStoreFigures(db: Database, options: { at: Date; targets: readonly string[] }): Promise<StoreFigures> {
  const { at } = options;
  const { seatsInUse, machines } = await countSeats(db, at);
  const licensesNearMachineLimit = await countNearLimit(db, at);
  const backups = await backupFigures(db);
  const copies = await copyFigures(db, options.targets);
  const deliveries = await deliveryFigures(db);
  const counted = await countAttentionLists(db, at, EXACT);
  const attention = Object.fromEntries(Object.entries(counted).map(([name, count]) => [name, count.count])) as Record<AttentionListName, number>;
  const key = await findSigningKey(db);
  const signingKey = key && { ageSeconds: Math.max(0, (at.getTime() - Date.parse(key.created_at)) / 1000), sealed: key.sealed };
  return { seatsInUse, machines, licensesNearMachineLimit, backups, copies, deliveries, attention, signingKey };
}

/**
 * Seats in use by the rule of seatHeld (licensing/machines.ts), and machines by state. A
 * machine of a floating license holds a seat only by its lease or file, and floating licenses
 * are few, so neither engine needs a license per machine, which the seat join looked up one by
 * one on SQLite (11.6 s at a million machines on a busy machine):
 * - PostgreSQL: one hash join of the machines with the floating licenses (0.9 s there, against
 *   1.9 s for the seat join);
 * - SQLite: one pass over the machines, looking up the license of those with a running lease
 *   or file alone, then the active machines of the floating licenses, by index (3 s; a join
 *   with the floating licenses as a set took 4.5 s).
 * test/lib/metrics/store-figures.test.ts holds both to the seat rule.
 */
async function countSeats(db: Database, at: Date): Promise<{ seatsInUse: number; machines: StoreFigures['machines'] }> {
  const stamp = at.toISOString();
  const machines = (total: unknown, active: unknown) => ({ active: Number(active ?? 0), deactivated: Number(total ?? 0) - Number(active ?? 0) });
  if (db.engine === 'postgres') {
    const [row] = await db.query(
      `SELECT count(*) AS machines,
         sum(CASE WHEN m.active = ? THEN 1 ELSE 0 END) AS active,
         sum(CASE WHEN (m.active = ? AND f.id IS NULL) OR m.lease_expires_at > ? OR m.offline_until > ? THEN 1 ELSE 0 END) AS seats
       FROM machines m LEFT JOIN (SELECT id FROM licenses WHERE floating = ?) f ON f.id = m.license_id`,
      [true, true, stamp, stamp, true],
    );
    return { seatsInUse: Number(row?.seats ?? 0), machines: machines(row?.machines, row?.active) };
  }
  // Nested CASE: a lease that is NULL must not reach the license lookup (NULL AND x evaluates x).
  const [scan] = await db.query(
    `SELECT count(*) AS machines,
       sum(CASE WHEN m.active = ? THEN 1 ELSE 0 END) AS active,
       sum(CASE WHEN m.lease_expires_at > ? OR m.offline_until > ?
         THEN (CASE WHEN m.active <> ? OR EXISTS (SELECT 1 FROM licenses l WHERE l.id = m.license_id AND l.floating = ?) THEN 1 ELSE 0 END)
         ELSE 0 END) AS by_lease
     FROM machines m`,
    [true, stamp, stamp, true, true],
  );
  const [floating] = await db.query(
    'SELECT sum((SELECT count(*) FROM machines m WHERE m.license_id = l.id AND m.active = ?)) AS active FROM licenses l WHERE l.floating = ?',
    [true, true],
  );
  // Active machines of licenses that are not floating, and the machines that hold a seat by a lease or file alone.
  const seatsInUse = Number(scan?.active ?? 0) - Number(floating?.active ?? 0) + Number(scan?.by_lease ?? 0);
  return { seatsInUse, machines: machines(scan?.machines, scan?.active) };
}

/**
 * Active licenses with max_machines whose seats in use are at least NEAR_LIMIT of it;
 * integers on both engines: used * 10 >= max * 9 is used >= 90 % of max. PostgreSQL
 * hash-joins the held machines with the limited licenses (about 1 s at a million machines).
 * SQLite would look a license up per machine, so it goes from the limited licenses instead
 * and counts a license's seats only when it has enough machines at all, which an index alone
 * answers (twice as fast).
 */
async function countNearLimit(db: Database, at: Date): Promise<number> {
  const held = seatHeld(at);
  const near = (count: string) => `${count} * 10 >= l.max_machines * ${Math.round(NEAR_LIMIT * 10)}`;
  const rows = await db.query(
    db.engine === 'postgres'
      ? `SELECT count(*) AS n FROM (
           SELECT l.max_machines AS max_machines, count(*) AS used FROM machines m JOIN licenses l ON l.id = m.license_id
           WHERE l.max_machines IS NOT NULL AND l.active = ? AND ${held.sql}
           GROUP BY l.id, l.max_machines
         ) l WHERE ${near('used')}`
      : `SELECT count(*) AS n FROM licenses l
         WHERE l.max_machines IS NOT NULL AND l.active = ?
           AND ${near('(SELECT count(*) FROM machines m WHERE m.license_id = l.id)')}
           AND ${near(`(SELECT count(*) FROM machines m WHERE m.license_id = l.id AND ${held.sql})`)}`,
    [true, ...held.params],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * From the audit log, which every process that backs up writes (CLI and daemons alike):
 * `backup.created` for a good backup, `backup.failed` for a failed attempt, each with its
 * trigger in the details. The newest per trigger, by the index on (action, occurred_at, id).
 */
export async function backupFigures(db: Database): Promise<Record<Trigger, BackupFigures>> {
  const trigger = db.engine === 'postgres' ? `details->>'trigger'` : `json_extract(details, '$.trigger')`;
  const newest = (action: string, value: Trigger) =>
    db.query(`SELECT entity_id, occurred_at, details FROM audit_log WHERE action = ? AND ${trigger} = ? ORDER BY occurred_at DESC, id DESC LIMIT 1`, [action, value]);
  const entries: Array<readonly [Trigger, BackupFigures]> = [];
  for (const value of TRIGGERS) {
    const created = await newest('backup.created', value);
    const failed = await newest('backup.failed', value);
    const success = created[0];
    const finished = success ? Date.parse(asIso(success.occurred_at)) / 1000 : undefined;
    const started = success ? startOfBackup(String(success.entity_id)) ?? finished : undefined;
    const details = success ? asJson(success.details) : {};
    const figures: BackupFigures = {
      lastSuccess: started,
      lastFailure: failed[0] ? Date.parse(asIso(failed[0].occurred_at)) / 1000 : undefined,
      // A backup adopted after a kill (details.recovered) was audited long after it was made.
      lastDurationSeconds: finished !== undefined && started !== undefined && details.recovered !== true ? Math.max(0, finished - started) : undefined,
      lastSizeBytes: typeof details.size === 'number' ? details.size : undefined,
    };
    entries.push([value, figures]);
  }
  return Object.fromEntries(entries) as Record<Trigger, BackupFigures>;
}

/** A backup id starts with its creation time to the millisecond (create.ts, newBackupId). */
function startOfBackup(id: string): number | undefined {
  const match = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\d{3})Z-/.exec(id);
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s, ms] = match;
  const time = Date.parse(`${y}-${mo}-${d}T${h}:${mi}:${s}.${ms}Z`);
  return Number.isNaN(time) ? undefined : time / 1000;
}

export async function copyFigures(db: Queryable, targets: readonly string[]): Promise<Map<string, CopyFigures>> {
  const rows = await db.query(
    `SELECT target, status, count(*) AS n, max(copied_at) AS copied_at, max(last_attempt_at) AS attempted_at FROM backup_copies GROUP BY target, status`,
  );
  const figures = new Map<string, { -readonly [K in keyof CopyFigures]: CopyFigures[K] }>();
  for (const target of targets) figures.set(target, { lastSuccess: undefined, lastFailure: undefined, pending: 0, copied: 0, failed: 0 });
  for (const row of rows) {
    // Only configured targets: a name used once and removed since would stay a series forever.
    const entry = figures.get(String(row.target));
    if (!entry) continue;
    const status = String(row.status) as 'pending' | 'copied' | 'failed';
    if (status !== 'pending' && status !== 'copied' && status !== 'failed') continue;
    entry[status] = Number(row.n);
    const copied = asIsoOrNull(row.copied_at);
    const attempted = asIsoOrNull(row.attempted_at);
    if (status === 'copied' && copied) entry.lastSuccess = Date.parse(copied) / 1000;
    if (status === 'failed' && attempted) entry.lastFailure = Date.parse(attempted) / 1000;
  }
  return figures;
}

async function deliveryFigures(db: Queryable): Promise<StoreFigures['deliveries']> {
  const rows = await db.query('SELECT status, count(*) AS n FROM notification_deliveries GROUP BY status');
  const counts = { pending: 0, delivered: 0, failed: 0 };
  for (const row of rows) {
    const status = String(row.status);
    if (status === 'pending' || status === 'delivered' || status === 'failed') counts[status] = Number(row.n);
  }
  return counts;
}
