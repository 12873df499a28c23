import { randomUUID } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import type { Keyset } from '../cursor.js';
import { LicenseServerError } from '../errors.js';
import { listLicensesPage, type License } from '../licensing/licenses.js';
import { listMachinesPage, type Machine } from '../licensing/machines.js';
import { fetchPage, pageQuery, type ListPage, type Page } from '../paging.js';
import { isUniqueViolation } from '../storage/errors.js';
import type { Database, Queryable, Row } from '../storage/types.js';
import { asInt, asIso, asIsoOrNull } from '../storage/values.js';
import { parseUuid } from '../validate.js';
import { parseBulkSpec, type BulkSpec } from './actions.js';
import { measureSelection, type BulkTarget, type SelectionParser } from './selection.js';

/**
 * Bulk jobs: one action (extend, suspend, ...) over every row a list filter selects, run by a
 * daemon in batches (runner.ts) and kept in `bulk_jobs` (migration 17), so that their progress
 * outlives the daemon and every daemon of the database sees it. One job is queued or running
 * at a time per database: the unique index refuses a second (BULK_JOB_RUNNING).
 */
export const BULK_STATES = ['queued', 'running', 'done', 'failed', 'cancelled'] as const;
export type BulkState = (typeof BULK_STATES)[number];

export interface BulkRowError {
  /** The license's or machine's id. */
  readonly id: string;
  readonly code: string;
  readonly message: string;
}

export interface BulkJob {
  readonly id: string;
  readonly target: BulkTarget;
  readonly action: string;
  /** The span of `extend`; null for the other actions. */
  readonly by: string | null;
  /** The list's query parameters, as given. */
  readonly filter: Readonly<Record<string, string>>;
  readonly state: BulkState;
  /** The rows the filter selected when the job was made. */
  readonly total: number;
  /** Rows handled so far: changed + unchanged + failed. */
  readonly done: number;
  readonly changed: number;
  /** Already as the action would leave them (a suspended license to suspend): nothing written. */
  readonly unchanged: number;
  readonly failed: number;
  /** The first MAX_ROW_ERRORS rows that failed, in the order they were reached. */
  readonly errors: readonly BulkRowError[];
  /** Why the job itself failed; null otherwise. */
  readonly error: string | null;
  /** How many times a daemon took the job up again after the one running it stopped or died. */
  readonly resumed: number;
  readonly created_by: string;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
}

/** Kept per job; `failed` counts every one. */
export const MAX_ROW_ERRORS = 1000;

export interface BulkRequest {
  readonly target: string;
  readonly action: string;
  readonly by?: string;
  /** The list's query parameters (`{"status": "expiring", "within": "30d"}`). */
  readonly filter: Readonly<Record<string, string>>;
}

export interface BulkPreview {
  readonly target: BulkTarget;
  readonly action: string;
  readonly by: string | null;
  readonly filter: Readonly<Record<string, string>>;
  /** The rows the job would act on if it were made now: the list's count for this filter. */
  readonly count: number;
  /** The first PREVIEW_ROWS of them, as the list gives them. */
  readonly first: ReadonlyArray<License | Machine>;
}

export const PREVIEW_ROWS = 5;

type QueuedListener = () => void;
const listeners = new Set<QueuedListener>();

/** Tells `listener` when this process queues a job (the daemon's runner starts it at once); returns the way to stop. */
export function onBulkQueued(listener: QueuedListener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/**
 * What a job would do, without doing it. `reads` answers the counting (the daemon's admin
 * reads, off the thread and connections that serve clients).
 */
export async function previewBulk(reads: Queryable, request: BulkRequest, select: SelectionParser, at: Date): Promise<BulkPreview> {
  const spec = parseBulkSpec(request.target, request.action, request.by);
  const selection = select(spec.target, request.filter);
  const { count } = await measureSelection(reads, selection, at);
  const page: ListPage<License | Machine> = selection.target === 'licenses'
    ? await listLicensesPage(reads, { ...selection.conditions, limit: PREVIEW_ROWS }, at)
    : await listMachinesPage(reads, { ...selection.conditions, limit: PREVIEW_ROWS }, at);
  return { target: spec.target, action: spec.action, by: spec.span, filter: request.filter, count, first: page.items };
}

/**
 * Makes a job, queued for a daemon's runner, and audits it as `bulk.started`. The rows are
 * counted now, and the last of them fixes the job's bound (selection.ts): the job is what the
 * operator saw in the preview, give or take the rows that changed since. A filter that
 * selects nothing makes a job that is done at once. BULK_JOB_RUNNING while another job is
 * queued or running, whichever daemon of the database made it.
 */
export async function createBulkJob(db: Database, reads: Queryable, request: BulkRequest, select: SelectionParser, context: OperationContext): Promise<BulkJob> {
  const spec = parseBulkSpec(request.target, request.action, request.by);
  const selection = select(spec.target, request.filter);
  // Before counting, which may read many rows: the index below is what decides.
  const live = await db.query("SELECT id FROM bulk_jobs WHERE state IN ('queued', 'running')");
  if (live[0]) throw jobRunning(String(live[0].id));
  const at = now(context);
  const { count, bound } = await measureSelection(reads, selection, at);
  const id = randomUUID();
  const stamp = at.toISOString();
  const empty = bound === null;
  try {
    await db.transaction(async (tx) => {
      await tx.execute(
        `INSERT INTO bulk_jobs (id, target, action, span, filters, state, total, bound, errors, created_by, created_at, started_at, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [id, spec.target, spec.action, spec.span, JSON.stringify(request.filter), empty ? 'done' : 'queued', count, bound === null ? null : JSON.stringify(bound), '[]',
          context.actor, stamp, empty ? stamp : null, empty ? stamp : null],
      );
      await recordAudit(tx, context, { action: 'bulk.started', entityType: 'bulk_job', entityId: id, details: { ...describeSpec(spec), filter: request.filter, total: count } });
      if (empty) await recordFinish(tx, context, await getBulkJob(tx, id));
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw jobRunning((await db.query("SELECT id FROM bulk_jobs WHERE state IN ('queued', 'running')"))[0]?.id);
    throw error;
  }
  if (!empty) for (const listener of listeners) listener();
  return getBulkJob(db, id);
}

function jobRunning(id: unknown): LicenseServerError {
  return new LicenseServerError('BULK_JOB_RUNNING', `bulk job ${id === undefined ? '(just finished)' : String(id)} is queued or running; one bulk job runs at a time`);
}

function describeSpec(spec: BulkSpec): Record<string, unknown> {
  return { target: spec.target, action: spec.action, ...(spec.span === null ? {} : { by: spec.span }) };
}

/** The job's closing audit entry, `bulk.finished`, with its outcome and counts. */
export async function recordFinish(tx: Queryable, context: OperationContext, job: BulkJob, extra: Record<string, unknown> = {}): Promise<void> {
  await recordAudit(tx, context, {
    action: 'bulk.finished',
    entityType: 'bulk_job',
    entityId: job.id,
    details: {
      ...describeSpec({ target: job.target, action: job.action, span: job.by }),
      state: job.state,
      total: job.total,
      changed: job.changed,
      unchanged: job.unchanged,
      failed: job.failed,
      ...(job.error === null ? {} : { error: job.error }),
      ...extra,
    },
  });
}

const COLUMNS = `id, target, action, span, filters, state, total, changed, unchanged, failed, errors, error, resumed,
  created_by, created_at, started_at, finished_at`;

export async function getBulkJob(db: Queryable, id: string): Promise<BulkJob> {
  const rows = await db.query(`SELECT ${COLUMNS} FROM bulk_jobs WHERE id = ?`, [parseUuid(id, 'bulk job id')]);
  if (!rows[0]) throw new LicenseServerError('BULK_JOB_NOT_FOUND', `no bulk job has the id ${id.toLowerCase()}`);
  return toJob(rows[0]);
}

export const BULK_JOB_KEYSET: Keyset = {
  list: 'bulk_jobs',
  keys: [{ column: 'created_at', field: 'created_at', kind: 'timestamp' }, { column: 'id', field: 'id', kind: 'uuid' }],
  descending: true,
};

/** Newest first. */
export async function listBulkJobsPage(db: Queryable, page: Page = {}): Promise<ListPage<BulkJob>> {
  return fetchPage(db, pageQuery(`SELECT ${COLUMNS} FROM bulk_jobs`, [], [], BULK_JOB_KEYSET, {}, page), toJob);
}

/**
 * Stops a queued or running job: the batch under way finishes (its rows are done and
 * counted), and no other starts. Audited as `bulk.finished` under the canceller, with
 * `cancelled_by`. BULK_JOB_FINISHED for a job that is over.
 */
export async function cancelBulkJob(db: Database, id: string, context: OperationContext): Promise<BulkJob> {
  const jobId = parseUuid(id, 'bulk job id');
  return db.transaction(async (tx) => {
    // The runner's batch holds the job's row until it commits (PostgreSQL), so this waits for
    // it and then counts what it did.
    const changed = await tx.execute(
      "UPDATE bulk_jobs SET state = 'cancelled', finished_at = ?, claimed_by = NULL, claimed_until = NULL WHERE id = ? AND state IN ('queued', 'running')",
      [now(context).toISOString(), jobId],
    );
    const job = await getBulkJob(tx, jobId);
    if (changed === 0) throw new LicenseServerError('BULK_JOB_FINISHED', `bulk job ${job.id} is already ${job.state}`);
    await recordFinish(tx, context, job, { cancelled_by: context.actor });
    return job;
  });
}

function toJob(row: Row): BulkJob {
  const [changed, unchanged, failed] = [asInt(row.changed), asInt(row.unchanged), asInt(row.failed)];
  return {
    id: String(row.id),
    target: String(row.target) as BulkTarget,
    action: String(row.action),
    by: row.span === null || row.span === undefined ? null : String(row.span),
    filter: parsedJson(row.filters) as Record<string, string>,
    state: String(row.state) as BulkState,
    total: asInt(row.total),
    done: changed + unchanged + failed,
    changed,
    unchanged,
    failed,
    errors: parsedJson(row.errors) as BulkRowError[],
    error: row.error === null || row.error === undefined ? null : String(row.error),
    resumed: asInt(row.resumed),
    created_by: String(row.created_by),
    created_at: asIso(row.created_at),
    started_at: asIsoOrNull(row.started_at),
    finished_at: asIsoOrNull(row.finished_at),
  };
}

/** A JSON column: PostgreSQL gives it parsed, SQLite as text. */
export function parsedJson(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}
