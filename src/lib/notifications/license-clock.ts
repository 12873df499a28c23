import { unindexedBoolean } from '../paging.js';
import type { Database, Queryable, Row, SqlValue } from '../storage/types.js';
import { asIso } from '../storage/values.js';
import { LICENSE_FIELD_COLUMNS, licenseFieldsOfRow } from './license-events.js';
import { raiseEvent } from './outbox.js';
import { hasEnabledRuleFor } from './events.js';

/** `notifications.expiring_soon_days` when unset: reminders 30, 7 and 1 days before the end. */

const DAY_MS = 86_400_000;
const BATCH = 500;

export interface DeadlineScanOptions {
  readonly now: Date;
  /** Days before valid_until at which `license.expiring_soon` fires (any order). */
  readonly windows: readonly number[];
  /** Licenses read per query and handled per transaction. */
  readonly batchSize?: number;
}

/**
 * Raises the time-based license events due at `now` (docs/notifications.md, "License events"):
 *
 * - `license.expiring_soon` for each active license (of an active customer) whose
 *   valid_until is within the largest window: once per license, valid_until and window.
 *   It fires for the smallest window the license is within; the larger windows are marked
 *   done without an event, so a scan after downtime sends one reminder, not a burst. The
 *   marks name valid_until, so a renewal starts the windows over for the new end.
 * - `license.expired` once per license and valid_until, for active licenses whose
 *   valid_until has passed, but only within the largest window (at least a day): a license
 *   that ended longer ago than that, such as one ended a year before this feature first
 *   ran, is never read, so a first scan of an old store sends nothing for it.
 *
 * An event no enabled rule selects is not scanned for at all.
 *
 * Each event is raised in the transaction that inserts its mark (ON CONFLICT DO NOTHING
 * RETURNING): two scans at once, on two daemons, raise it once between them. Only the
 * licenses whose valid_until is in the windows are read, by the index licenses_valid_until,
 * in batches; the marks already made are found with one query per batch. `raised` counts
 * the events this scan decided on, whether or not an alert rule wanted them.
 */
export async function scanLicenseDeadlines(db: Database, options: DeadlineScanOptions): Promise<{ raised: number }> {
  const windows = parseWindows(options.windows);
  const batchSize = options.batchSize ?? BATCH;
  const at = options.now.getTime();
  const largest = windows[0] ?? 0;
  let raised = 0;
  // With no rule that wants them, a scan would only write marks: it reads nothing. A rule
  // added later starts at each license's current window (the catch-up rule), not a burst.
  const [expiring, expired] = await Promise.all([hasEnabledRuleFor(db, 'license.expiring_soon'), hasEnabledRuleFor(db, 'license.expired')]);
  if (largest > 0 && expiring) {
    raised += await scanRange(db, options.now, at, at + largest * DAY_MS, batchSize, (row) => {
      const fields = licenseFieldsOfRow(row);
      const left = Date.parse(fields.valid_until) - at;
      // The smallest window the license is within: windows is sorted largest first.
      const window = windows.filter((days) => left <= days * DAY_MS).at(-1)!;
      const key = (days: number) => `license.expiring_soon:${fields.license_id}:${fields.valid_until}:${days}`;
      return {
        key: key(window),
        skipped: windows.filter((days) => days > window).map(key),
        event: 'license.expiring_soon',
        data: { ...fields, days_left: Math.ceil(left / DAY_MS), window_days: window },
      };
    });
  }
  if (expired) raised += await scanRange(db, options.now, at - Math.max(largest, 1) * DAY_MS, at, batchSize, (row) => {
    const fields = licenseFieldsOfRow(row);
    return { key: `license.expired:${fields.license_id}:${fields.valid_until}`, skipped: [], event: 'license.expired', data: fields };
  });
  return { raised };
}

/** Positive whole days, no two alike, largest first. */
export function parseWindows(windows: readonly number[]): number[] {
  for (const days of windows) {
    if (!Number.isSafeInteger(days) || days < 1 || days > 3650) throw new RangeError(`an expiring-soon window must be a whole number of days from 1 to 3650, got ${days}`);
  }
  return [...new Set(windows)].sort((a, b) => b - a);
}

interface Due {
  /** The mark whose insert decides the event. */
  readonly key: string;
  /** Marks made with it, for events that no longer need raising (larger windows passed while down). */
  readonly skipped: readonly string[];
  readonly event: 'license.expiring_soon' | 'license.expired';
  readonly data: Record<string, unknown>;
}

/**
 * One batch of the active licenses (of active customers) with valid_until up to `upper`:
 * the first after the moment `after` (exclusive), or the next after a cursor. Exported for
 * the query-plan test: it must read the index licenses_valid_until, never the whole table.
 */
export function deadlineBatchQuery(
  upper: string,
  start: { readonly after: string } | { readonly validUntil: string; readonly id: string },
  batchSize: number,
): { sql: string; params: SqlValue[] } {
  const params: SqlValue[] = [upper, true, true];
  // Most licenses and customers are active: SQLite would otherwise walk an index on active and sort.
  // The >= bound lets the index start at the cursor; the OR only skips the ids already seen at it.
  const from = 'after' in start
    ? (params.push(start.after), 'l.valid_until > ?')
    : (params.push(start.validUntil, start.validUntil, start.id), 'l.valid_until >= ? AND (l.valid_until > ? OR l.id > ?)');
  return {
    sql: `SELECT ${LICENSE_FIELD_COLUMNS} FROM licenses l JOIN customers c ON c.id = l.customer_id
       WHERE l.valid_until <= ? AND ${unindexedBoolean('l.active')} = ? AND ${unindexedBoolean('c.active')} = ? AND ${from}
       ORDER BY l.valid_until, l.id LIMIT ?`,
    params: [...params, batchSize],
  };
}

/** Handles the active licenses with valid_until in (from, to], in batches by (valid_until, id). */
async function scanRange(db: Database, now: Date, from: number, to: number, batchSize: number, due: (row: Row) => Due): Promise<number> {
  const upper = new Date(to).toISOString();
  let cursor: { validUntil: string; id: string } | undefined;
  let raised = 0;
  for (;;) {
    const query = deadlineBatchQuery(upper, cursor ?? { after: new Date(from).toISOString() }, batchSize);
    const rows = await db.query(query.sql, query.params);
    if (rows.length === 0) return raised;
    const last = rows[rows.length - 1]!;
    cursor = { validUntil: asIso(last.valid_until), id: String(last.id) };
    const candidates = rows.map(due);
    const done = await existingMarks(db, candidates.map((candidate) => candidate.key));
    const open = candidates.filter((candidate) => !done.has(candidate.key));
    if (open.length > 0) raised += await db.transaction((tx) => raiseDue(tx, open, now));
    if (rows.length < batchSize) return raised;
  }
}

async function raiseDue(tx: Queryable, dues: readonly Due[], now: Date): Promise<number> {
  let raised = 0;
  const at = now.toISOString();
  for (const candidate of dues) {
    const won = await tx.query('INSERT INTO notification_marks (key, at, count) VALUES (?, ?, 1) ON CONFLICT (key) DO NOTHING RETURNING key', [candidate.key, at]);
    if (won.length === 0) continue;
    for (const key of candidate.skipped) {
      await tx.execute('INSERT INTO notification_marks (key, at, count) VALUES (?, ?, 0) ON CONFLICT (key) DO NOTHING', [key, at]);
    }
    await raiseEvent(tx, candidate.event, candidate.data, { clock: () => now });
    raised += 1;
  }
  return raised;
}

async function existingMarks(db: Queryable, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const rows = await db.query(`SELECT key FROM notification_marks WHERE key IN (${keys.map(() => '?').join(', ')})`, keys);
  return new Set(rows.map((row) => String(row.key)));
}
