import type { Queryable } from '../storage/types.js';

// The events and which rules select them: what raising an event needs, apart from the
// settings' validation (settings.ts), so that code which only may raise one (license
// writes, and every command that reads licenses through the same module) loads little.

/** Every event the server sends (docs/notifications.md). */
export const EVENTS = [
  'backup.succeeded',
  'backup.failed',
  'backup.restored',
  'backup.copy_failed',
  'backup.stale',
  'backup.replication_stalled',
  'backup.drill_failed',
  'license.checked_out',
  'license.created',
  'license.updated',
  'license.renewed',
  'license.deactivated',
  'license.expired',
  'license.expiring_soon',
  'machine.activated',
  'machine.migrated',
  'machine.limit_exceeded',
  'usage.threshold',
  'signing_key.rotated',
] as const;
export type EventName = (typeof EVENTS)[number];

/** Whether an enabled alert rule selects `event`: what decides if anything is sent for it. */
export async function hasEnabledRuleFor(db: Queryable, event: string): Promise<boolean> {
  const patterns = patternsSelecting(event);
  const rows = await db.query(`SELECT 1 AS found FROM notification_alert_rules WHERE enabled = ? AND event IN (${patterns.map(() => '?').join(', ')}) LIMIT 1`, [true, ...patterns]);
  return rows.length > 0;
}

/**
 * Every rule pattern that selects `event` (eventMatches): the event itself, `*`, and each
 * `prefix.*` before one of its dots. A rule's pattern is one of these exactly when it
 * matches, so a query can find the rules by equality.
 */
export function patternsSelecting(event: string): string[] {
  const patterns = [event, '*'];
  for (let dot = event.indexOf('.'); dot !== -1; dot = event.indexOf('.', dot + 1)) patterns.push(`${event.slice(0, dot + 1)}*`);
  return patterns;
}

export function eventMatches(pattern: string, event: string): boolean {
  if (pattern === '*' || pattern === event) return true;
  return pattern.endsWith('.*') && event.startsWith(pattern.slice(0, -1));
}
