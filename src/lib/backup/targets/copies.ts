import { randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../../storage/types.js';
import { hostTag, ownerState, processStart } from '../locks/work-owner.js';
import { asIso, asIsoOrNull } from '../../storage/values.js';
import type { CopyOutcome } from './copy.js';
import type { TargetFailure } from './target.js';

/**
 * The bookkeeping of off-site copies in `backup_copies` (migration 9): which backup still has
 * to reach which target, who is copying it now, and what went wrong last. A copy is claimed
 * for a lease before it starts, so two processes (two daemons on PostgreSQL, or a command and
 * the daemon) never copy the same backup to the same target at once. A claim names its holder
 * (copyOwner: host, pid and the process's start, and the attempt, since one process may make
 * two: a daemon's own copier and a request to its API, or two requests); when that holder
 * ran on this host and is gone (killed while copying), the next process that looks takes the
 * claim over at once: the restarted daemon's first round, or `backup copy`. A live claim is
 * never taken, whoever asks, this very process included. A claim of a process on another
 * host cannot be checked from here: it ends with its lease.
 */
export const COPY_LEASE_MS = 30 * 60_000;

/**
 * A new claimant: this process and one attempt of it, `<host tag>:<pid>:<start>/<attempt>`
 * (work-owner.ts; `:<start>` left out where it cannot be read; the attempt 12 random hex
 * digits). Each call names another attempt: whoever claims keeps the name for its own finishCopy.
 */
export function copyOwner(): string {
  const start = processStart();
  return `${hostTag()}:${process.pid}${start === undefined ? '' : `:${start}`}/${randomBytes(6).toString('hex')}`;
}

/**
 * Whether a claim's holder runs: 'gone' only for one on this host that no longer does. The
 * process decides, not the attempt. Names of older releases lack the attempt, and some the start.
 */
export function claimHolderState(claimedBy: string): 'alive' | 'gone' | 'other-host' {
  const holder = /^([0-9a-f]{8}):(\d+)(?::(\d+))?(?:\/[0-9a-f]{1,32})?$/.exec(claimedBy);
  // Not a name this code writes: nothing can be said of it, so it is left to its lease.
  if (!holder) return 'other-host';
  return ownerState({ host: holder[1]!, pid: Number(holder[2]), ...(holder[3] === undefined ? {} : { start: holder[3] }) });
}

export interface CopyRetry {
  /** Seconds before the first retry; each later one waits twice as long, up to maxDelay. */
  readonly firstDelaySeconds: number;
  readonly maxDelaySeconds: number;
}

export const DEFAULT_COPY_RETRY: CopyRetry = { firstDelaySeconds: 60, maxDelaySeconds: 3600 };

export interface DueCopy {
  readonly backup_id: string;
  readonly target: string;
  readonly attempts: number;
}

/**
 * Notes that `backupId` is to be copied to each of `targets`. A note already there is left as
 * it is (a failed copy keeps its backoff), except that with `again` a copy recorded as made
 * is noted again: the target no longer holds it (emptied by hand, or lost), or an operator
 * asks for it by name.
 */
export async function notePendingCopies(db: Queryable, backupId: string, targets: readonly string[], at: Date, again = false): Promise<void> {
  const onConflict = again
    ? `DO UPDATE SET status = 'pending', next_attempt_at = excluded.next_attempt_at WHERE backup_copies.status = 'copied'`
    : 'DO NOTHING';
  for (const target of targets) {
    await db.execute(
      `INSERT INTO backup_copies (backup_id, target, status, attempts, next_attempt_at, created_at)
       VALUES (?, ?, 'pending', 0, ?, ?) ON CONFLICT (backup_id, target) ${onConflict}`,
      [backupId, target, at.toISOString(), at.toISOString()],
    );
  }
}

/**
 * Claims the copy of `backupId` to `target` for `owner` (a copyOwner() of its own), unless it
 * is copied or held. True when this attempt may copy it now. A claim whose holder ran on this
 * host and is gone (a command killed mid-copy) is taken over at once rather than after its
 * lease: the operator's next `backup copy` must not wait half an hour for a dead process. A
 * live holder's is not, this process's own included (the daemon's copier is sending it now).
 */
export async function claimCopy(db: Database, backupId: string, target: string, owner: string, at: Date): Promise<boolean> {
  const until = new Date(at.getTime() + COPY_LEASE_MS).toISOString();
  const changed = await db.execute(
    `UPDATE backup_copies SET claimed_by = ?, claimed_until = ?
     WHERE backup_id = ? AND target = ? AND status <> 'copied' AND (claimed_until IS NULL OR claimed_until < ?)`,
    [owner, until, backupId, target, at.toISOString()],
  );
  if (changed === 1) return true;
  const [row] = await db.query<{ claimed_by: string | null; status: string }>('SELECT claimed_by, status FROM backup_copies WHERE backup_id = ? AND target = ?', [backupId, target]);
  if (!row || row.status === 'copied' || row.claimed_by === null || claimHolderState(row.claimed_by) !== 'gone') return false;
  return (await db.execute(
    `UPDATE backup_copies SET claimed_by = ?, claimed_until = ? WHERE backup_id = ? AND target = ? AND claimed_by = ?`,
    [owner, until, backupId, target, row.claimed_by],
  )) === 1;
}

/**
 * Gives up the claims whose holder ran on this host and is gone, so that their copies are
 * due now rather than when the lease ends. Each is given up only if it is still that holder's.
 */
async function releaseDeadClaims(db: Database, at: Date): Promise<void> {
  const held = await db.query(
    `SELECT backup_id, target, claimed_by FROM backup_copies WHERE status <> 'copied' AND claimed_by IS NOT NULL AND claimed_until >= ?`,
    [at.toISOString()],
  );
  for (const row of held) {
    if (claimHolderState(String(row.claimed_by)) !== 'gone') continue;
    await db.execute('UPDATE backup_copies SET claimed_by = NULL, claimed_until = NULL WHERE backup_id = ? AND target = ? AND claimed_by = ?', [
      String(row.backup_id), String(row.target), String(row.claimed_by),
    ]);
  }
}

/**
 * Claims up to `limit` copies whose retry is due, oldest backup first (a catch-up goes in
 * order); a copy whose holder on this host is gone is due again at once.
 */
export async function claimDueCopies(db: Database, owner: string, at: Date, limit: number): Promise<DueCopy[]> {
  await releaseDeadClaims(db, at);
  const lock = db.engine === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '';
  const due = await db.query(`SELECT 1 FROM backup_copies WHERE status <> 'copied' AND next_attempt_at <= ? LIMIT 1`, [at.toISOString()]);
  if (due.length === 0) return [];
  const rows = await db.transaction((tx) =>
    tx.query(
      `UPDATE backup_copies SET claimed_by = ?, claimed_until = ?
       WHERE (backup_id, target) IN (SELECT backup_id, target FROM backup_copies
                                     WHERE status <> 'copied' AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?)
                                     ORDER BY backup_id LIMIT ${Math.max(1, Math.floor(limit))}${lock})
       RETURNING backup_id, target, attempts`,
      [owner, new Date(at.getTime() + COPY_LEASE_MS).toISOString(), at.toISOString(), at.toISOString()],
    ),
  );
  return rows
    .map((row) => ({ backup_id: String(row.backup_id), target: String(row.target), attempts: Number(row.attempts) }))
    .sort((a, b) => (a.backup_id < b.backup_id ? -1 : 1));
}

/** Records how a claimed copy ended, and gives the claim up. A failure is retried on the backoff schedule. */
export async function finishCopy(db: Database, outcome: CopyOutcome, owner: string, at: Date, retry: CopyRetry = DEFAULT_COPY_RETRY): Promise<void> {
  const stamp = at.toISOString();
  if (outcome.result === 'copied' || outcome.result === 'present') {
    await db.execute(
      `UPDATE backup_copies SET status = 'copied', copied_at = ?, last_attempt_at = ?, last_error = NULL, attempts = attempts + 1,
         claimed_by = NULL, claimed_until = NULL WHERE backup_id = ? AND target = ? AND (claimed_by = ? OR claimed_by IS NULL)`,
      [stamp, stamp, outcome.backup_id, outcome.target, owner],
    );
    return;
  }
  const rows = await db.query<{ attempts: unknown }>('SELECT attempts FROM backup_copies WHERE backup_id = ? AND target = ?', [outcome.backup_id, outcome.target]);
  const attempts = Number(rows[0]?.attempts ?? 0) + 1;
  const delay = Math.min(retry.maxDelaySeconds, retry.firstDelaySeconds * 2 ** Math.min(attempts - 1, 30));
  await db.execute(
    `UPDATE backup_copies SET status = 'failed', attempts = ?, last_attempt_at = ?, last_error = ?, next_attempt_at = ?,
       claimed_by = NULL, claimed_until = NULL WHERE backup_id = ? AND target = ? AND (claimed_by = ? OR claimed_by IS NULL)`,
    [attempts, stamp, storedError(outcome), new Date(at.getTime() + delay * 1000).toISOString(), outcome.backup_id, outcome.target, owner],
  );
}

/** Why a copy failed, as an outcome names it: a target's failure, or a backup it must not take. */
export type CopyFailure = TargetFailure | 'unencrypted';

const FAILURES: ReadonlySet<string> = new Set<CopyFailure>(['unreachable', 'timeout', 'auth', 'host-key', 'missing', 'full', 'protocol', 'unencrypted']);

/**
 * last_error holds the reason before the words, `<reason>: <error>` (the summary line's form),
 * so that the reason survives without a column of its own; lastCopyErrors splits them again.
 */
function storedError(outcome: CopyOutcome): string {
  const error = outcome.error ?? outcome.result;
  return outcome.reason ? `${outcome.reason}: ${error}` : error;
}

function splitStoredError(text: string): { readonly reason: CopyFailure | null; readonly error: string } {
  const colon = text.indexOf(': ');
  const reason = colon > 0 ? text.slice(0, colon) : '';
  // A row written before reasons were kept: the words alone.
  return FAILURES.has(reason) ? { reason: reason as CopyFailure, error: text.slice(colon + 2) } : { reason: null, error: text };
}

export interface LastCopyError {
  readonly error: string;
  readonly reason: CopyFailure | null;
  readonly at: string;
  readonly backup_id: string;
}

/** Each target's last attempt that failed after its last success: what `backup status` shows as its last error. */
export async function lastCopyErrors(db: Queryable): Promise<Map<string, LastCopyError>> {
  const rows = await db.query(
    `SELECT target, backup_id, last_error, last_attempt_at, status FROM backup_copies WHERE last_attempt_at IS NOT NULL ORDER BY last_attempt_at`,
  );
  const errors = new Map<string, LastCopyError>();
  for (const row of rows) {
    const target = String(row.target);
    if (row.status === 'copied') errors.delete(target);
    else if (row.last_error !== null) errors.set(target, { ...splitStoredError(String(row.last_error)), at: asIso(row.last_attempt_at), backup_id: String(row.backup_id) });
  }
  return errors;
}

/**
 * Where a target's copies not made yet stand (`backup status`): every backup noted for it and
 * not copied there, so that the target's newest backup is never shown without the newer one
 * on its way. A copy is `copying` while a live process holds its claim (a process on another
 * host counts as live until its lease ends), `stuck` when its holder ran on this host and is
 * gone (the next daemon round or `backup copy` takes it over), and `waiting` otherwise: for
 * its first attempt, or for its retry at `next_attempt_at`.
 */
export interface CopyBacklog {
  readonly pending: number;
  readonly copying: number;
  readonly stuck: number;
  /** The newest backup not copied there yet, and how its copy stands; null when none is pending. */
  readonly newest: {
    readonly backup_id: string;
    readonly state: 'waiting' | 'copying' | 'stuck';
    /** Attempts that ended (a failure); a copy killed in the middle is not one. */
    readonly attempts: number;
    /** When a waiting copy is next tried (it may be due already); null while it is held. */
    readonly next_attempt_at: string | null;
  } | null;
}

export async function copyBacklog(db: Queryable, at: Date): Promise<Map<string, CopyBacklog>> {
  const rows = await db.query(
    `SELECT backup_id, target, attempts, claimed_by, claimed_until, next_attempt_at FROM backup_copies WHERE status <> 'copied' ORDER BY backup_id`,
  );
  const backlog = new Map<string, { pending: number; copying: number; stuck: number; newest: NonNullable<CopyBacklog['newest']> | null }>();
  for (const row of rows) {
    const target = String(row.target);
    const entry = backlog.get(target) ?? { pending: 0, copying: 0, stuck: 0, newest: null };
    const held = row.claimed_by !== null && row.claimed_until !== null && Date.parse(asIso(row.claimed_until)) >= at.getTime();
    const state = !held ? 'waiting' : claimHolderState(String(row.claimed_by)) === 'gone' ? 'stuck' : 'copying';
    entry.pending += 1;
    if (state === 'copying') entry.copying += 1;
    if (state === 'stuck') entry.stuck += 1;
    // Ordered by backup id, which sorts by time: the last one is the newest.
    entry.newest = { backup_id: String(row.backup_id), state, attempts: Number(row.attempts), next_attempt_at: state === 'waiting' ? asIso(row.next_attempt_at) : null };
    backlog.set(target, entry);
  }
  return backlog;
}

/** When each target last took a copy (null: never), from the bookkeeping. */
export async function lastCopied(db: Queryable): Promise<Map<string, string | null>> {
  const rows = await db.query(`SELECT target, max(copied_at) AS copied_at FROM backup_copies GROUP BY target`);
  return new Map(rows.map((row) => [String(row.target), asIsoOrNull(row.copied_at)]));
}
