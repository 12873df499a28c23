import type { OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { renewLicense } from '../licensing/license-changes.js';
import { setLicenseActive } from '../licensing/licenses.js';
import { deactivateMachine, reactivateMachine } from '../licensing/machines.js';
import { parseDuration } from '../duration.js';
import type { Database, Queryable, Row } from '../storage/types.js';
import { asBool } from '../storage/values.js';
import { describe } from '../validate.js';
import { BULK_TARGETS, type BulkTarget } from './selection.js';

/**
 * What a bulk job does to each row: the single action of the API, called as it is (so each
 * row gets exactly the audit entry and the event that action writes, under the job's
 * actor), inside the job's batch transaction.
 */
interface RowAction {
  /** The span of `extend`; the other actions take none. */
  readonly takesSpan: boolean;
  /** The row is already as the action would leave it: the single action would change and audit nothing. */
  readonly alreadyDone?: (row: Row) => boolean;
  apply(db: Database, id: string, span: string | null, context: OperationContext): Promise<unknown>;
}

const ACTIONS: { readonly [T in BulkTarget]: Readonly<Record<string, RowAction>> } = {
  licenses: {
    // POST /api/licenses/{id}/renew {"by": span}
    extend: { takesSpan: true, apply: (db, id, span, context) => renewLicense(db, id, { by: span! }, context) },
    // POST /api/licenses/{id}/deactivate and /activate
    suspend: { takesSpan: false, alreadyDone: (row) => !asBool(row.active), apply: (db, id, _span, context) => setLicenseActive(db, id, false, context) },
    reinstate: { takesSpan: false, alreadyDone: (row) => asBool(row.active), apply: (db, id, _span, context) => setLicenseActive(db, id, true, context) },
  },
  machines: {
    // POST /api/machines/{id}/deactivate and /activate
    deactivate: { takesSpan: false, alreadyDone: (row) => !asBool(row.active), apply: (db, id, _span, context) => deactivateMachine(db, id, context) },
    reactivate: { takesSpan: false, alreadyDone: (row) => asBool(row.active), apply: (db, id, _span, context) => reactivateMachine(db, id, context) },
  },
};

export const BULK_ACTIONS: { readonly [T in BulkTarget]: readonly string[] } = {
  licenses: Object.keys(ACTIONS.licenses),
  machines: Object.keys(ACTIONS.machines),
};

export interface BulkSpec {
  readonly target: BulkTarget;
  readonly action: string;
  /** The span of `extend` (`30d`); null for the other actions. */
  readonly span: string | null;
}

/** Checks a job's target, action and span; INVALID_INPUT names what is wrong and what is allowed. */
export function parseBulkSpec(target: string, action: string, span: string | undefined): BulkSpec {
  if (!(BULK_TARGETS as readonly string[]).includes(target)) {
    throw new LicenseServerError('INVALID_INPUT', `target must be one of ${BULK_TARGETS.join(', ')}, got ${describe(target)}`);
  }
  const known = ACTIONS[target as BulkTarget];
  const rowAction = Object.hasOwn(known, action) ? known[action]! : undefined;
  if (!rowAction) {
    throw new LicenseServerError('INVALID_INPUT', `the actions on ${target} are ${Object.keys(known).join(', ')}, got ${describe(action)}`);
  }
  if (rowAction.takesSpan) {
    if (span === undefined) throw new LicenseServerError('INVALID_INPUT', `${action} needs "by", such as "30d"`);
    parseDuration(span, 'by');
  } else if (span !== undefined) {
    throw new LicenseServerError('INVALID_INPUT', `${action} takes no "by"`);
  }
  return { target: target as BulkTarget, action, span: span ?? null };
}

export function rowAction(spec: Pick<BulkSpec, 'target' | 'action'>): RowAction {
  const action = ACTIONS[spec.target][spec.action];
  if (!action) throw new LicenseServerError('INVALID_INPUT', `no action ${describe(spec.action)} on ${spec.target}`);
  return action;
}

/**
 * The batch's transaction as a Database for the single actions, which each open a
 * transaction of their own: here they run inside the batch's instead (under the savepoint of
 * their row), so that their changes commit with the job's progress, or not at all.
 */
export function insideTransaction(tx: Queryable, db: Pick<Database, 'engine' | 'location'>): Database {
  return {
    engine: db.engine,
    location: db.location,
    query: (sql, params) => tx.query(sql, params),
    execute: (sql, params) => tx.execute(sql, params),
    transaction: (fn) => fn(tx),
    close: async () => undefined,
  };
}
