import { mkdir } from 'node:fs/promises';
import type { ResolvedConfig } from '../config/resolve.js';
import { now, type OperationContext } from '../context.js';
import { ERROR_TABLE, LicenseServerError } from '../errors.js';
import type { Queryable } from '../storage/types.js';
import { checkRestoredStore } from './drill-checks.js';
import { recordDrill } from './drill-history.js';
import { listBackups } from './repository.js';
import type { ValidationCheck } from './validate.js';

/** A backup's snapshot starts just after its created_at: a write in flight then may be missing from it. */
const BACKUP_IN_FLIGHT_MS = 5_000;
/** How much older than a replica's newest WAL segment (as Litestream lists it) a write must be to be in it. */
const REPLICA_SEGMENT_MARGIN_MS = 2_000;

export interface DrillPart {
  readonly source: 'backup' | 'replica';
  /** The backup's id, or the replicated target's name. */
  readonly name: string;
  readonly ok: boolean;
  /** When the restored state is from: the backup's creation, or the replica's newest WAL segment. */
  readonly state_at: string | null;
  /** Every live row made at or before this was required to be in the restored store. */
  readonly complete_through: string | null;
  readonly seconds: number;
  /** What was checked, in order, up to the one that failed. */
  readonly checks: readonly ValidationCheck[];
  readonly error: { readonly code: string; readonly message: string } | null;
}

export interface DrillRecord {
  readonly started_at: string;
  readonly finished_at: string;
  readonly trigger: 'manual' | 'scheduled';
  readonly ok: boolean;
  readonly parts: readonly DrillPart[];
}

export interface DrillOptions {
  readonly config: ResolvedConfig;
  /** The store that serves: only read (row counts, signing keys). */
  readonly live: Queryable;
  /** Where a failure is raised (backup.drill_failed): the store that serves, through a connection that may write. Default: `live`. */
  readonly events?: Queryable;
  readonly trigger: DrillRecord['trigger'];
  readonly context: OperationContext;
  /** Where the replicated targets' `*_env` credentials are read. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  readonly onPart?: (part: DrillPart) => void;
}

/**
 * A restore drill: the newest backup in backup.path and each replica's latest state are
 * restored into scratch places (never the serving store, never backup.path's archives) and
 * checked as a restore would need them: integrity, schema, every live row made by the moment
 * they must hold, the live signing keys, and a `.lic` signed now that verifies. The result is
 * recorded beside the backups (drill-history.ts) and a failure raises backup.drill_failed.
 * Throws BACKUP_NOT_FOUND only when there is nothing to drill.
 */
export async function runDrill(options: DrillOptions): Promise<DrillRecord> {
  const { config } = options;
  const started = now(options.context);
  const parts: DrillPart[] = [];
  const add = (part: DrillPart) => {
    parts.push(part);
    options.onPart?.(part);
  };
  const backups = await listBackups(config.settings.backup.path);
  const newest = backups.sort((a, b) => b.created_at.localeCompare(a.created_at))[0];
  if (newest) add(await drillBackup(options, newest.backup_id, newest.created_at));
  else if (config.settings.backup.enabled) add(failedPart('backup', '(none)', new LicenseServerError('BACKUP_NOT_FOUND', `backup.enabled is on but ${config.settings.backup.path} holds no backup yet`)));
  for (const target of config.settings.backup.replication?.targets ?? []) add(await drillReplica(options, target.name, started));
  if (parts.length === 0) {
    throw new LicenseServerError('BACKUP_NOT_FOUND', `nothing to drill: ${config.settings.backup.path} holds no backup and backup.replication is not set`);
  }
  const record: DrillRecord = { started_at: started.toISOString(), finished_at: now(options.context).toISOString(), trigger: options.trigger, ok: parts.every((part) => part.ok), parts };
  await mkdir(config.settings.backup.path, { recursive: true, mode: 0o700 });
  await recordDrill(config.settings.backup.path, record);
  if (!record.ok) {
    const { raiseEvent } = await import('../notifications/outbox.js');
    const failed = parts.filter((part) => !part.ok).map((part) => ({ source: part.source, name: part.name, error: part.error?.message ?? null }));
    await raiseEvent(options.events ?? options.live, 'backup.drill_failed', { started_at: record.started_at, failed_count: failed.length, failed: failed.map((part) => `${part.source} ${part.name}: ${part.error}`).join('; '), parts: failed }, options.context);
  }
  return record;
}

async function drillBackup(options: DrillOptions, id: string, createdAt: string): Promise<DrillPart> {
  const { config } = options;
  const started = performance.now();
  const completeThrough = new Date(Date.parse(createdAt) - BACKUP_IN_FLIGHT_MS);
  const { validateBackup } = await import('./validate.js');
  try {
    const validation = await validateBackup({
      directory: config.settings.backup.path,
      reference: id,
      key: config.settings.backup.encryptionKey,
      // A PostgreSQL dump is converted into a scratch SQLite file: a drill never loads into the server that serves.
      inspect: (file) => checkRestoredStore({ file, live: options.live, completeThrough, keyEncryptionKey: config.settings.signing.keyEncryptionKey, issuer: config.settings.issuer, context: options.context }),
    });
    return { source: 'backup', name: id, ok: true, state_at: createdAt, complete_through: completeThrough.toISOString(), seconds: since(started), checks: validation.checks, error: null };
  } catch (error) {
    return { ...failedPart('backup', id, error, started), state_at: createdAt, complete_through: completeThrough.toISOString() };
  }
}

async function drillReplica(options: DrillOptions, target: string, drillStarted: Date): Promise<DrillPart> {
  const { config } = options;
  const started = performance.now();
  const [{ restoreReplica }, { stallThresholdMs }, { checkSqlite, sqliteSchemaVersion }, { SCHEMA_VERSION }] = await Promise.all([
    import('../replication/point-in-time.js'),
    import('../replication/replicator.js'),
    import('./engines/sqlite-snapshot.js'),
    import('../storage/migrations.js'),
  ]);
  // The replica may trail the store by as much as the stall threshold before the daemon says so.
  const lagAllowed = new Date(drillStarted.getTime() - stallThresholdMs(config.settings.backup.replication!));
  const checks: ValidationCheck[] = [];
  let stateAt: string | null = null;
  let completeThrough = lagAllowed;
  try {
    const restored = await restoreReplica({ config, target, environment: options.environment });
    try {
      stateAt = restored.moment.state_at;
      // Up to the replica's newest WAL segment (listed to the second, and a write reaches a
      // segment up to a WAL read later: 2 s), so that a gap is found whatever the lag allowed;
      // a replica behind by more than the lag allowed is found by its older bound.
      completeThrough = new Date(Math.max(Date.parse(stateAt) - REPLICA_SEGMENT_MARGIN_MS, lagAllowed.getTime()));
      checks.push({ check: 'restore', detail: `litestream restore of generation ${restored.moment.generation}, snapshot ${restored.moment.snapshot.index} of ${restored.moment.snapshot.created_at}, replayed to ${restored.moment.state_at}` });
      await checkSqlite(restored.file, 'integrity_check');
      const version = await sqliteSchemaVersion(restored.file);
      if (version !== SCHEMA_VERSION) throw new LicenseServerError('RESTORE_DRILL_FAILED', `the replica's database has schema ${version}, this server's is ${SCHEMA_VERSION}`);
      checks.push({ check: 'database', detail: `SQLite integrity_check ok, schema ${version}` });
      checks.push(...(await checkRestoredStore({ file: restored.file, live: options.live, completeThrough, keyEncryptionKey: config.settings.signing.keyEncryptionKey, issuer: config.settings.issuer, context: options.context })));
    } finally {
      await restored.dispose();
    }
    return { source: 'replica', name: target, ok: true, state_at: stateAt, complete_through: completeThrough.toISOString(), seconds: since(started), checks, error: null };
  } catch (error) {
    return { ...failedPart('replica', target, error, started), checks, state_at: stateAt, complete_through: completeThrough.toISOString() };
  }
}

function failedPart(source: DrillPart['source'], name: string, error: unknown, started = performance.now()): DrillPart {
  // By its code, not its class: an archive is read in a worker thread, whose errors arrive cloned.
  const code = (error as { code?: unknown } | undefined)?.code;
  const known = typeof code === 'string' && Object.hasOwn(ERROR_TABLE, code);
  const message = error instanceof Error ? error.message : String(error);
  const reported = { code: known ? code : 'INTERNAL', message: message.slice(0, 500) };
  return { source, name, ok: false, state_at: null, complete_through: null, seconds: since(started), checks: [], error: reported };
}

function since(started: number): number {
  return Math.round(performance.now() - started) / 1000;
}
