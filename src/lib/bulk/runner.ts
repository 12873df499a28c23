import { claimHolderState, copyOwner as newClaimant } from '../backup/targets/copies.js';
import type { OperationContext } from '../context.js';
import { positionOf } from '../cursor.js';
import { LicenseServerError } from '../errors.js';
import type { Database, Queryable } from '../storage/types.js';
import { asIsoOrNull } from '../storage/values.js';
import { insideTransaction, rowAction } from './actions.js';
import { getBulkJob, MAX_ROW_ERRORS, onBulkQueued, parsedJson, recordFinish, type BulkJob, type BulkRowError } from './jobs.js';
import { rowsAfter, type Position, type SelectionParser } from './selection.js';

export interface BulkRunnerOptions {
  readonly database: () => Database;
  /** The list routes' filter parser (selection.ts SelectionParser). */
  readonly select: SelectionParser;
  readonly clock?: () => Date;
  readonly log?: (entry: Record<string, unknown>) => void;
  /** Rows per batch at most, each batch one transaction (default BULK_BATCH_SIZE). */
  readonly batchSize?: number;
  /**
   * A batch takes no more rows once it has run this long (ms, default BULK_BATCH_MS): it holds
   * its rows' locks, and on SQLite the database's one write lock, until it commits, and a
   * daemon stopping waits for it.
   */
  readonly batchMs?: number;
  /** How often queued jobs and abandoned claims are looked for when nothing wakes the runner (ms). */
  readonly pollMs?: number;
  /** How long a claim holds without a batch renewing it (ms): then another daemon takes the job over. */
  readonly leaseMs?: number;
  /**
   * After a batch, the runner waits this many times as long as the batch took (at most a
   * second), so that a long job leaves the database and, on SQLite, the daemon's thread to the
   * clients' validations most of the time.
   */
  readonly yieldFactor?: number;
  /** Called with the job after each batch commits, before the next starts; awaited. */
  readonly onBatch?: (job: BulkJob) => void | Promise<void>;
}

export const BULK_BATCH_SIZE = 100;
export const BULK_BATCH_MS = 250;
export const BULK_POLL_MS = 5_000;
export const BULK_LEASE_MS = 60_000;
/** Batches in a row that may fail for reasons other than the database being away before the job is given up. */
const MAX_BATCH_FAILURES = 5;

type BatchOutcome = 'more' | 'finished' | 'lost';

/**
 * Runs the bulk jobs of the database, on every daemon; each job is claimed by one of them
 * (a lease renewed by every batch). A batch is one transaction: the rows' changes, their
 * audit entries and events, and the job's progress commit together, so a daemon that dies
 * mid-batch leaves that batch undone and the job resumes exactly after the last one that
 * committed, never acting on a row twice. A daemon that stops cleanly finishes its batch and
 * puts the job back in the queue; the next runner to look (this daemon's next start, or
 * another daemon at once) resumes it. A claim whose holder ran on this host and is gone (a
 * killed daemon) is taken over at once; another host's, when its lease ends.
 */
export class BulkRunner {
  /** This runner's name in claims: its host, process and an attempt of its own. */
  readonly owner = newClaimant();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private unsubscribe: (() => void) | undefined;
  private interruptSleep: (() => void) | undefined;

  constructor(private readonly options: BulkRunnerOptions) {}

  start(): void {
    this.unsubscribe = onBulkQueued(() => this.wake());
    this.schedule(0);
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.schedule(0);
  }

  /**
   * Starts no batch more; the one under way commits, and its job goes back to the queue for
   * the next runner. Waits up to `graceMs` for that; a batch that outlives the process rolls
   * back with it, and its claim is taken over as the class comment says.
   */
  async stop(graceMs = 5000): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.unsubscribe?.();
    this.interruptSleep?.();
    if (this.running) await Promise.race([this.running, new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
  }

  /** Resolves when no job is being run by this runner (for tests). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.again = false;
      this.running = this.round().finally(() => {
        this.running = undefined;
        this.schedule(this.again ? 0 : this.options.pollMs ?? BULK_POLL_MS);
      });
    }, ms);
    this.timer.unref();
  }

  private now(): Date {
    return (this.options.clock ?? (() => new Date()))();
  }

  private log(entry: Record<string, unknown>): void {
    this.options.log?.({ time: new Date().toISOString(), ...entry });
  }

  /** Claims the job waiting, if any, and runs it to its end or until this runner stops. Never throws. */
  private async round(): Promise<void> {
    const claimed = await this.claim().catch((error: unknown) => {
      this.log({ level: 'error', msg: 'bulk jobs could not be looked for', error: describeError(error) });
      return undefined;
    });
    if (claimed === undefined) return;
    const { db, id } = claimed;
    const first = await getBulkJob(db, id).catch(() => undefined);
    this.log({ level: 'info', msg: first?.resumed ? 'bulk job resumed' : 'bulk job started', bulk_job: id, done: first?.done, total: first?.total });
    let failures = 0;
    for (;;) {
      if (this.stopped) {
        await this.release(db, id).catch((error: unknown) => this.log({ level: 'warn', msg: 'bulk job left claimed at shutdown', bulk_job: id, error: describeError(error) }));
        this.log({ level: 'info', msg: 'bulk job paused for shutdown; the next daemon to look resumes it', bulk_job: id });
        return;
      }
      const started = performance.now();
      let outcome: BatchOutcome;
      try {
        outcome = await this.batch(db, id);
        failures = 0;
      } catch (error) {
        const unavailable = error instanceof LicenseServerError && error.httpStatus >= 500;
        const refused = error instanceof LicenseServerError && !unavailable;
        failures += unavailable ? 0 : 1;
        if (refused || failures >= MAX_BATCH_FAILURES) {
          await this.fail(db, id, error).catch((failure: unknown) => this.log({ level: 'error', msg: 'bulk job could not be marked failed', bulk_job: id, error: describeError(failure) }));
          return;
        }
        this.log({ level: 'warn', msg: 'bulk job batch failed; it is tried again', bulk_job: id, error: describeError(error) });
        await this.sleep(Math.min(30_000, 1000 * 2 ** failures));
        continue;
      }
      if (outcome !== 'more') {
        const job = await getBulkJob(db, id).catch(() => undefined);
        this.log({ level: 'info', msg: outcome === 'lost' ? 'bulk job left to another' : 'bulk job finished', bulk_job: id, state: job?.state, done: job?.done, failed: job?.failed });
        return;
      }
      if (this.options.onBatch) await this.options.onBatch(await getBulkJob(db, id));
      await this.sleep(Math.min(1000, (performance.now() - started) * (this.options.yieldFactor ?? 1)));
    }
  }

  /** The queued job, or a running one whose claim ran out or whose holder on this host is gone. */
  private async claim(): Promise<{ db: Database; id: string } | undefined> {
    const db = this.options.database();
    const at = this.now();
    const [row] = await db.query("SELECT id, state, claimed_by, claimed_until FROM bulk_jobs WHERE state IN ('queued', 'running')");
    if (!row) return undefined;
    const holder = row.claimed_by === null || row.claimed_by === undefined ? null : String(row.claimed_by);
    const until = asIsoOrNull(row.claimed_until);
    if (row.state === 'running' && holder !== null && holder !== this.owner) {
      const leased = until !== null && Date.parse(until) > at.getTime();
      if (leased && claimHolderState(holder) !== 'gone') return undefined;
    }
    // Compared with what was read: of two runners taking the same job over, one wins.
    const changed = await db.execute(
      `UPDATE bulk_jobs SET state = 'running', claimed_by = ?, claimed_until = ?, started_at = COALESCE(started_at, ?),
         resumed = resumed + CASE WHEN started_at IS NULL THEN 0 ELSE 1 END
       WHERE id = ? AND state = ? AND ${holder === null ? 'claimed_by IS NULL' : 'claimed_by = ?'} AND ${until === null ? 'claimed_until IS NULL' : 'claimed_until = ?'}`,
      [this.owner, this.leaseEnd(at), at.toISOString(), String(row.id), String(row.state), ...(holder === null ? [] : [holder]), ...(until === null ? [] : [row.claimed_until as string | Date])],
    );
    return changed === 1 ? { db, id: String(row.id) } : undefined;
  }

  private leaseEnd(at: Date): string {
    return new Date(at.getTime() + (this.options.leaseMs ?? BULK_LEASE_MS)).toISOString();
  }

  /**
   * One batch in one transaction: renew the claim (which, on PostgreSQL, also holds the job's
   * row, so a cancel or a takeover waits for this batch), walk the next rows, act on each in
   * order under a savepoint (a row refused rolls back alone and is recorded; anything else
   * rolls the batch back) until the batch is full or its time is up, and store where the walk
   * got to: the last row acted on.
   */
  private batch(db: Database, id: string): Promise<BatchOutcome> {
    return db.transaction(async (tx) => {
      const at = this.now();
      const held = await tx.execute("UPDATE bulk_jobs SET claimed_until = ? WHERE id = ? AND claimed_by = ? AND state = 'running'", [this.leaseEnd(at), id, this.owner]);
      if (held === 0) return 'lost';
      const [row] = await tx.query('SELECT target, action, span, filters, bound, position, errors, created_by FROM bulk_jobs WHERE id = ?', [id]);
      const job = { target: String(row!.target) as 'licenses' | 'machines', action: String(row!.action), span: row!.span === null ? null : String(row!.span) };
      const bound = parsedJson(row!.bound) as Position | null;
      const after = parsedJson(row!.position) as Position | null;
      const context: OperationContext = { actor: String(row!.created_by), clock: this.options.clock };
      const action = rowAction(job);
      const selection = this.options.select(job.target, parsedJson(row!.filters) as Record<string, string>);
      const { rows, keyset, last } = bound === null
        ? { rows: [], keyset: undefined, last: true }
        : await rowsAfter(tx, selection, after, bound, this.options.batchSize ?? BULK_BATCH_SIZE, at);
      const inner = insideTransaction(tx, db);
      const errors = parsedJson(row!.errors) as BulkRowError[];
      let [changed, unchanged, failed] = [0, 0, 0];
      const deadline = performance.now() + (this.options.batchMs ?? BULK_BATCH_MS);
      let taken = 0;
      for (const item of rows) {
        if (taken > 0 && performance.now() >= deadline) break;
        taken += 1;
        const rowId = String(item.id);
        if (action.alreadyDone?.(item)) {
          unchanged += 1;
          continue;
        }
        await tx.execute('SAVEPOINT bulk_row');
        try {
          await action.apply(inner, rowId, job.span, context);
          await tx.execute('RELEASE SAVEPOINT bulk_row');
          changed += 1;
        } catch (error) {
          // The database failing is not the row's fault: the whole batch goes back, and is tried again.
          if (!(error instanceof LicenseServerError) || error.httpStatus >= 500) throw error;
          await tx.execute('ROLLBACK TO SAVEPOINT bulk_row');
          await tx.execute('RELEASE SAVEPOINT bulk_row');
          failed += 1;
          if (errors.length < MAX_ROW_ERRORS) errors.push({ id: rowId, code: error.code, message: error.message });
        }
      }
      const position = taken > 0 ? positionOf(keyset!, rows[taken - 1]!) : after;
      const finished = last && taken === rows.length;
      await tx.execute(
        `UPDATE bulk_jobs SET position = ?, changed = changed + ?, unchanged = unchanged + ?, failed = failed + ?, errors = ?,
           state = ?, finished_at = ?, claimed_by = ?, claimed_until = ? WHERE id = ?`,
        [position === null ? null : JSON.stringify(position), changed, unchanged, failed, JSON.stringify(errors),
          finished ? 'done' : 'running', finished ? at.toISOString() : null, finished ? null : this.owner, finished ? null : this.leaseEnd(at), id],
      );
      if (finished) await recordFinish(tx, context, await getBulkJob(tx, id));
      return finished ? 'finished' : 'more';
    });
  }

  /** Back to the queue, where it was: for the next runner to resume. */
  private async release(db: Database, id: string): Promise<void> {
    await db.execute("UPDATE bulk_jobs SET state = 'queued', claimed_by = NULL, claimed_until = NULL WHERE id = ? AND claimed_by = ? AND state = 'running'", [id, this.owner]);
  }

  private async fail(db: Database, id: string, error: unknown): Promise<void> {
    const message = error instanceof LicenseServerError ? `${error.code}: ${error.message}` : 'the batch failed repeatedly; the daemon\'s log has why';
    this.log({ level: 'error', msg: 'bulk job failed', bulk_job: id, error: describeError(error) });
    await db.transaction(async (tx: Queryable) => {
      const changed = await tx.execute(
        "UPDATE bulk_jobs SET state = 'failed', error = ?, finished_at = ?, claimed_by = NULL, claimed_until = NULL WHERE id = ? AND claimed_by = ? AND state = 'running'",
        [message.slice(0, 500), this.now().toISOString(), id, this.owner],
      );
      if (changed === 0) return;
      const job = await getBulkJob(tx, id);
      await recordFinish(tx, { actor: job.created_by, clock: this.options.clock }, job);
    });
  }

  /** Waits, unless the runner is stopped meanwhile. */
  private async sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.stopped) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.interruptSleep = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.interruptSleep = undefined;
  }
}

/** For the log only: the class and first line, no request data. */
function describeError(error: unknown): string {
  if (error instanceof LicenseServerError) return `${error.code}: ${error.message}`;
  if (error instanceof Error) return `${error.name}: ${(error.message.split('\n')[0] ?? '').slice(0, 200)}`;
  return typeof error;
}
