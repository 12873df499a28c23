import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ReplicationStatus } from '../lib/replication/replicator.js';
import type { DrillRecord } from '../lib/backup/drill.js';
import type { WalArchivingStatus } from '../lib/backup/wal-archiving.js';
import { TRIGGERS } from '../lib/backup/archive/manifest.js';
import { isLicenseServerError, LicenseServerError } from '../lib/errors.js';
import { StoreFiguresCache, STALE_AFTER_INTERVALS } from '../lib/metrics/store-figures-cache.js';
import { readStoreFigures, type StoreFigures } from '../lib/metrics/store-figures.js';
import type { StorageObserver } from '../lib/storage/observer.js';
import type { Database } from '../lib/storage/types.js';

/**
 * The daemon's Prometheus metrics (docs/metrics.md). One registry per daemon, never
 * prom-client's global one, so that daemons built in one process (the tests) keep their
 * figures apart. Every label takes its values from a fixed set: route templates, statuses,
 * outcomes, backup triggers, configured targets. No license, key, customer or address.
 */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export const VALIDATION_OUTCOMES = [
  'valid', 'expired', 'not_yet_valid', 'revoked', 'machine_limit', 'deactivated', 'hardware_mismatch', 'not_found', 'invalid_request', 'error',
] as const;
export type ValidationOutcome = (typeof VALIDATION_OUTCOMES)[number];

/** What POST /api/v1/validate answered (`valid`, `reason`) or threw, as one bounded outcome. */
export function validationOutcome(result: { readonly answer: { readonly valid: boolean; readonly reason?: string } } | { readonly error: unknown }): ValidationOutcome {
  if ('answer' in result) return result.answer.valid ? 'valid' : outcomeOfCode(result.answer.reason ?? '');
  return outcomeOfCode(isLicenseServerError(result.error) ? result.error.code : '', result.error);
}

function outcomeOfCode(code: string, error?: unknown): ValidationOutcome {
  switch (code) {
    case 'LICENSE_EXPIRED':
      return 'expired';
    case 'LICENSE_NOT_YET_VALID':
      return 'not_yet_valid';
    // A license or its customer deactivated by an operator: the license is revoked.
    case 'LICENSE_INACTIVE':
    case 'CUSTOMER_INACTIVE':
      return 'revoked';
    case 'MACHINE_LIMIT_EXCEEDED':
      return 'machine_limit';
    case 'MACHINE_DEACTIVATED':
      return 'deactivated';
    case 'HARDWARE_MISMATCH':
      return 'hardware_mismatch';
    case 'LICENSE_NOT_FOUND':
      return 'not_found';
    default:
      return error instanceof LicenseServerError && error.httpStatus < 500 ? 'invalid_request' : 'error';
  }
}

export const CHECKOUT_OUTCOMES = ['issued', 'refused', 'error'] as const;
export const USAGE_OUTCOMES = ['recorded', 'replayed', 'refused', 'error'] as const;

/** 4xx: the caller's request was refused; anything else: the daemon failed. */
export function refusalOrError(error: unknown): 'refused' | 'error' {
  return error instanceof LicenseServerError && error.httpStatus < 500 ? 'refused' : 'error';
}

/** What routes count; absent in route tables built without a daemon (the docs tests). */
export interface RequestMetrics {
  validation(outcome: ValidationOutcome): void;
  checkout(outcome: (typeof CHECKOUT_OUTCOMES)[number]): void;
  usageReport(outcome: (typeof USAGE_OUTCOMES)[number]): void;
}

/** Where the store's figures come from (read in the background, store-figures-cache.ts), and the configuration shown. */
export interface StoreSource {
  /** The database the figures are read from (storage/admin-databases.ts): never the clients'. */
  database(): Database;
  /** The pools of this process by name (`daemon`, `admin`); a database without a pool is left out. */
  pools(): ReadonlyArray<readonly [string, Database]>;
  /** The names of the configured off-site targets. */
  targets(): readonly string[];
  /** server.metrics_store_refresh: seconds between reads of the store's figures. */
  refreshSeconds(): number;
  /** backup.max_age in seconds, or undefined when unset. */
  backupMaxAgeSeconds(): number | undefined;
  /** Continuous replication's state (replication/replicator.ts), or undefined when none runs. */
  replication?(): ReplicationStatus | undefined;
  /** The restore drills recorded beside the backups (backup/drill-history.ts), newest first. */
  drills?(): Promise<readonly DrillRecord[]>;
  /** The longest gap between two slots of backup.drill.schedule, in seconds; undefined when serve runs no drills. */
  drillIntervalSeconds?(): number | undefined;
  /** PostgreSQL's WAL archiving as pg_stat_archiver reports it (backup/wal-archiving.ts); undefined on SQLite. */
  walArchiving?(): Promise<WalArchivingStatus | undefined>;
  /** A background read failed (the figures keep the last good read's values). */
  readFailed?(error: unknown): void;
}

/**
 * A gauge without labels that can be absent, as the HELP of those below says: prom-client's
 * always has a value, 0 until set, and a 0 reads as a value to an alert rule (a max age of 0
 * makes every backup stale; a replication_up of 0 says Litestream is down where none runs).
 * Absent until set() after each reset().
 */
class OptionalGauge<L extends string = string> extends Gauge<L> {
  private present = false;

  override set(value: number): void;
  override set(labels: Partial<Record<L, string | number>>, value: number): void;
  override set(first: number | Partial<Record<L, string | number>>, second?: number): void {
    this.present = true;
    if (typeof first === 'number') super.set(first);
    else super.set(first, second!);
  }

  override reset(): void {
    this.present = false;
    super.reset();
  }

  override async get(): Promise<Awaited<ReturnType<Gauge<L>['get']>>> {
    const metric = await super.get();
    return this.present ? metric : { ...metric, values: [] };
  }
}

export class DaemonMetrics implements RequestMetrics {
  readonly registry = new Registry();
  /** For openDatabase: what storage reports (lib/storage/observer.ts). */
  readonly storage: StorageObserver;
  private source: StoreSource | undefined;
  /** pg_stat_archiver as this scrape read it: one read for the gauges that show it. */
  private walArchivingRead: Promise<WalArchivingStatus | undefined> | undefined;
  /** The store's figures, read in the background once watch() is called; a scrape only renders them. */
  private cache: StoreFiguresCache | undefined;
  private readonly clock: () => Date;
  private readonly requests: Counter<'route' | 'status'>;
  private readonly latency: Histogram<'route'>;
  private readonly validations: Counter<'outcome'>;
  private readonly checkouts: Counter<'outcome'>;
  private readonly usage: Counter<'outcome'>;
  private readonly rateLimited: Counter<'route'>;

  constructor(options: { processMetrics?: boolean; clock?: () => Date } = {}) {
    const registers = [this.registry];
    const clock = options.clock ?? (() => new Date());
    this.clock = clock;
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });

    this.requests = new Counter({
      name: 'license_server_http_requests_total',
      help: 'HTTP requests answered by this process, by route template (METHOD /path/:param; "unmatched" for no route) and status ("aborted": the connection closed first).',
      labelNames: ['route', 'status'],
      registers,
    });
    this.latency = new Histogram({
      name: 'license_server_http_request_duration_seconds',
      help: 'Time from a request\'s arrival to its answer\'s last byte handed to the socket, by route template.',
      labelNames: ['route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.validations = new Counter({
      name: 'license_server_validations_total',
      help: 'Online validations (POST /api/v1/validate) answered by this process, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.checkouts = new Counter({
      name: 'license_server_checkouts_total',
      help: 'Offline license files checked out through this process (POST /api/licenses/:id/checkout), by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.usage = new Counter({
      name: 'license_server_usage_reports_total',
      help: 'Usage reports (POST /api/v1/usage) handled by this process, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'license_server_rate_limited_total',
      help: 'Client requests this process refused with 429 RATE_LIMITED, by route template.',
      labelNames: ['route'],
      registers,
    });
    // Every outcome from the start, so that rate() and alerts see a 0 before the first one.
    for (const outcome of VALIDATION_OUTCOMES) this.validations.inc({ outcome }, 0);
    for (const outcome of CHECKOUT_OUTCOMES) this.checkouts.inc({ outcome }, 0);
    for (const outcome of USAGE_OUTCOMES) this.usage.inc({ outcome }, 0);

    const busy = new Counter({
      name: 'license_server_sqlite_busy_total',
      help: 'SQLite statements of this process that waited the whole busy timeout (5 s) for another process\'s lock and failed with DATABASE_UNAVAILABLE.',
      registers,
    });
    this.storage = { sqliteBusy: () => busy.inc() };

    const pools = this.pools.bind(this);
    new Gauge({
      name: 'license_server_db_pool_connections',
      help: 'PostgreSQL connections of this process\'s pools (daemon: clients\' requests and background work; admin: admin requests), by state (in_use, idle).',
      labelNames: ['pool', 'state'],
      registers,
      collect() {
        this.reset();
        for (const [name, stats] of pools()) {
          this.set({ pool: name, state: 'in_use' }, stats.inUse);
          this.set({ pool: name, state: 'idle' }, stats.total - stats.inUse);
        }
      },
    });
    new Gauge({
      name: 'license_server_db_pool_waiting',
      help: 'Callers of this process waiting for a PostgreSQL connection because all of the pool\'s are in use.',
      labelNames: ['pool'],
      registers,
      collect() {
        this.reset();
        for (const [name, stats] of pools()) this.set({ pool: name }, stats.waiting);
      },
    });

    const source = () => this.source;
    new OptionalGauge({
      name: 'license_server_backup_max_age_seconds',
      help: 'backup.max_age of this process\'s configuration, in seconds: the age past which LicenseServerBackupStale (prometheus-alerts.yml) fires. Absent when backup.max_age is unset.',
      registers,
      collect() {
        this.reset();
        const seconds = source()?.backupMaxAgeSeconds();
        if (seconds !== undefined) this.set(seconds);
      },
    });

    this.replicationGauges(registers);
    this.drillGauges(registers);
    this.walArchivingGauges(registers);
    this.storeGauges(registers);
  }

  /**
   * PostgreSQL's pg_stat_archiver, read once per scrape (every gauge below shares the read,
   * which render() forgets); absent on SQLite, or when the read fails.
   */
  private walArchivingGauges(registers: Registry[]): void {
    const status = () => (this.walArchivingRead ??= this.source?.walArchiving?.().catch(() => undefined) ?? Promise.resolve(undefined));
    new OptionalGauge<'state'>({
      name: 'license_server_wal_archive_state',
      help: 'PostgreSQL\'s WAL archiving (pgBackRest, docs/replication.md), 1 for the state it is in: ok, failing (the newest attempt failed), stale (completed WAL files wait and nothing was archived for max(300 s, 2 archive_timeout)), or off (archive_mode off). Absent on SQLite.',
      labelNames: ['state'],
      registers,
      async collect() {
        this.reset();
        const current = await status();
        if (current) for (const state of ['ok', 'failing', 'stale', 'off'] as const) this.set({ state }, current.state === state ? 1 : 0);
      },
    });
    new OptionalGauge({
      name: 'license_server_wal_archive_last_success_timestamp_seconds',
      help: 'When PostgreSQL last archived a WAL file (pg_stat_archiver.last_archived_time), in Unix seconds. Absent on SQLite and until one is archived.',
      registers,
      async collect() {
        this.reset();
        const archivedAt = (await status())?.last_archived_at;
        if (archivedAt) this.set(Date.parse(archivedAt) / 1000);
      },
    });
    new OptionalGauge({
      name: 'license_server_wal_archive_failures',
      help: 'Failed attempts to archive a WAL file since PostgreSQL\'s statistics were reset (pg_stat_archiver.failed_count). Absent on SQLite.',
      registers,
      async collect() {
        this.reset();
        const current = await status();
        if (current) this.set(current.failed_count);
      },
    });
    new OptionalGauge({
      name: 'license_server_wal_archive_waiting_segments',
      help: 'Completed WAL files not archived yet: between the last archived and the one being written. Absent on SQLite, on a standby, and before the first archive.',
      registers,
      async collect() {
        this.reset();
        const waiting = (await status())?.waiting_segments;
        if (waiting !== undefined && waiting !== null) this.set(waiting);
      },
    });
  }

  /** Read from the drill history at each scrape (a small file); absent until a drill is recorded. */
  private drillGauges(registers: Registry[]): void {
    const drills = async () => (await this.source?.drills?.().catch(() => undefined)) ?? [];
    new OptionalGauge({
      name: 'license_server_restore_drill_last_success_timestamp_seconds',
      help: 'When the newest restore drill that passed (`backup drill`, or serve on backup.drill.schedule) finished, in Unix seconds. Absent until one has passed.',
      registers,
      async collect() {
        this.reset();
        const passed = (await drills()).find((drill) => drill.ok);
        if (passed) this.set(Date.parse(passed.finished_at) / 1000);
      },
    });
    const source = () => this.source;
    new OptionalGauge({
      name: 'license_server_restore_drill_interval_seconds',
      help: 'The longest gap between two of serve\'s scheduled restore drills (backup.drill.schedule), in seconds: LicenseServerRestoreDrillOverdue (prometheus-alerts.yml) fires when the last success is older than twice this. Absent when backup.drill.enabled is off.',
      registers,
      collect() {
        this.reset();
        const seconds = source()?.drillIntervalSeconds?.();
        if (seconds !== undefined) this.set(seconds);
      },
    });
    new OptionalGauge({
      name: 'license_server_restore_drill_last_run_timestamp_seconds',
      help: 'When the newest restore drill finished, passed or not, in Unix seconds. Absent until one has run.',
      registers,
      async collect() {
        this.reset();
        const [newest] = await drills();
        if (newest) this.set(Date.parse(newest.finished_at) / 1000);
      },
    });
    new OptionalGauge({
      name: 'license_server_restore_drill_last_ok',
      help: 'Whether the newest restore drill passed: 1, or 0 when a part of it failed (its backup.drill_failed event and `backup drill` say which check). Absent until one has run.',
      registers,
      async collect() {
        this.reset();
        const [newest] = await drills();
        if (newest) this.set(newest.ok ? 1 : 0);
      },
    });
  }

  /** Read from the replicator at each scrape; absent when serve replicates nothing. */
  private replicationGauges(registers: Registry[]): void {
    const status = () => this.source?.replication?.();
    new OptionalGauge({
      name: 'license_server_replication_up',
      help: 'Whether Litestream, which serve runs to replicate the SQLite database (backup.replication), is running: 1, or 0 while serve restarts it or a restore has paused it.',
      registers,
      collect() {
        this.reset();
        const current = status();
        if (current) this.set(current.state === 'replicating' && current.pid !== null ? 1 : 0);
      },
    });
    // Counters kept by the replicator, copied at each scrape.
    new Counter({
      name: 'license_server_replication_restarts_total',
      help: 'Times serve has started Litestream again after it died, since serve started.',
      registers,
      collect() {
        this.reset();
        const current = status();
        if (current) this.inc(current.restarts);
      },
    });
    new Gauge({
      name: 'license_server_replication_lag_seconds',
      help: 'How long each replica has been behind the database, in seconds: 0 when it holds every write Litestream has seen. Absent until known.',
      labelNames: ['target'],
      registers,
      collect() {
        this.reset();
        for (const replica of status()?.replicas ?? []) if (replica.lag_seconds !== null) this.set({ target: replica.target }, replica.lag_seconds);
      },
    });
    new Counter({
      name: 'license_server_replication_errors_total',
      help: 'Errors Litestream logged for each replica since serve started (failed uploads, an unreachable target).',
      labelNames: ['target'],
      registers,
      collect() {
        this.reset();
        for (const replica of status()?.replicas ?? []) this.inc({ target: replica.target }, replica.errors);
      },
    });
  }

  /**
   * Reads the pools from `source` at each scrape, and the store's figures in the background
   * from now on: at once, then every source.refreshSeconds() (store-figures-cache.ts), until
   * close().
   */
  watch(source: StoreSource): void {
    this.cache?.close();
    this.source = source;
    this.cache = new StoreFiguresCache({
      read: (at) => readStoreFigures(source.database(), { at, targets: source.targets() }),
      intervalMs: () => source.refreshSeconds() * 1000,
      clock: this.clock,
      onError: (error) => source.readFailed?.(error),
    });
    this.cache.start();
  }

  /**
   * The newest background read of the store's figures while it is fresh (the read succeeded,
   * and it is at most STALE_AFTER_INTERVALS refresh intervals old), with the time it started.
   */
  freshStoreFigures(): { figures: StoreFigures; readAt: Date } | undefined {
    const cache = this.cache;
    if (!cache?.fresh()) return undefined;
    const { figures, readAt } = cache.snapshot();
    return figures === undefined || readAt === undefined ? undefined : { figures, readAt: new Date(readAt) };
  }

  /** Stops the background reads of the store's figures. */
  close(): void {
    this.cache?.close();
  }

  request(route: string, status: number | null, seconds: number): void {
    this.requests.inc({ route, status: status === null ? 'aborted' : String(status) });
    this.latency.observe({ route }, seconds);
    if (status === 429) this.rateLimited.inc({ route });
  }

  validation(outcome: ValidationOutcome): void {
    this.validations.inc({ outcome });
  }

  checkout(outcome: (typeof CHECKOUT_OUTCOMES)[number]): void {
    this.checkouts.inc({ outcome });
  }

  usageReport(outcome: (typeof USAGE_OUTCOMES)[number]): void {
    this.usage.inc({ outcome });
  }

  /** The Prometheus text format, METRICS_CONTENT_TYPE. Sends nothing to the database: the store's figures are the newest background read's. */
  render(): Promise<string> {
    this.walArchivingRead = undefined;
    return this.registry.metrics();
  }

  private pools(): Array<readonly [string, { total: number; inUse: number; waiting: number }]> {
    const found: Array<readonly [string, { total: number; inUse: number; waiting: number }]> = [];
    for (const [name, db] of this.source?.pools() ?? []) {
      const stats = db.poolStats?.();
      if (stats) found.push([name, stats]);
    }
    return found;
  }

  /**
   * Gauges of the shared database, named `license_server_store_*`: every daemon on one store
   * reports the same values, give or take one refresh interval, so a dashboard takes max (or
   * any one), never sum. They show the newest background read that succeeded; when the newest
   * read failed or is too old, they keep those values and license_server_store_up says 0.
   */
  private storeGauges(registers: Registry[]): void {
    const cache = () => this.cache;
    const SHARED = ' Read from the shared database in the background (server.metrics_store_refresh): the same on every daemon of one store (take max, not sum).';
    const storeGauge = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[],
      fill: (gauge: Gauge<L>, value: StoreFigures) => void,
    ) =>
      // Unlabelled: absent until the first read that sets it; labelled series come and go with reset().
      new (labelNames.length === 0 ? OptionalGauge<L> : Gauge<L>)({
        name: `license_server_store_${name}`,
        help: `${help}${SHARED}`,
        labelNames,
        registers,
        collect() {
          const value = cache()?.snapshot().figures;
          if (!value) return;
          if (labelNames.length > 0) this.reset();
          fill(this, value);
        },
      });

    new Gauge({
      name: 'license_server_store_up',
      help: `1 when this process's newest background read of the store's figures succeeded and they are at most ${STALE_AFTER_INTERVALS} refresh intervals old, else 0 (the license_server_store_* gauges then keep the values of the last good read).`,
      registers,
      collect() {
        this.set(cache()?.fresh() ? 1 : 0);
      },
    });
    new OptionalGauge({
      name: 'license_server_store_figures_age_seconds',
      help: 'Seconds since this process started the read that the license_server_store_* gauges show (at most one refresh interval plus the read, when all is well). Absent before the first good read.',
      registers,
      collect() {
        this.reset();
        const age = cache()?.ageSeconds();
        if (age !== undefined) this.set(age);
      },
    });
    new OptionalGauge({
      name: 'license_server_store_read_duration_seconds',
      help: 'How long this process\'s newest good read of the store\'s figures took (reading them counts the whole machines table). Absent before the first good read.',
      registers,
      collect() {
        this.reset();
        const seconds = cache()?.snapshot().readSeconds;
        if (seconds !== undefined) this.set(seconds);
      },
    });
    storeGauge('seats_in_use', 'Machines holding a seat of their license now, all licenses together.', [], (g, v) => g.set(v.seatsInUse));
    storeGauge('machines', 'Machines known, all licenses together, by state (active, deactivated).', ['state'], (g, v) => {
      g.set({ state: 'active' }, v.machines.active);
      g.set({ state: 'deactivated' }, v.machines.deactivated);
    });
    storeGauge('licenses_near_machine_limit', 'Active licenses with max_machines whose seats in use are 90 % of it or more (a count of licenses, not one series each).', [], (g, v) =>
      g.set(v.licensesNearMachineLimit),
    );
    const perTrigger = (name: string, help: string, pick: (b: StoreFigures['backups'][(typeof TRIGGERS)[number]]) => number | undefined) =>
      storeGauge(name, help, ['trigger'], (g, v) => {
        for (const trigger of TRIGGERS) {
          const value = pick(v.backups[trigger]);
          if (value !== undefined) g.set({ trigger }, value);
        }
      });
    perTrigger('backup_last_success_timestamp_seconds', 'When the newest good backup of each trigger (manual, scheduled, pre-restore) was made: its created_at, in seconds since 1970. Absent for a trigger that never made one.', (b) => b.lastSuccess);
    perTrigger('backup_last_failure_timestamp_seconds', 'When the newest failed backup attempt of each trigger failed, in seconds since 1970. Absent for a trigger that never failed.', (b) => b.lastFailure);
    perTrigger('backup_last_duration_seconds', 'How long the newest good backup of each trigger took, from its start to its verified archive.', (b) => b.lastDurationSeconds);
    perTrigger('backup_last_size_bytes', 'Size of the newest good backup\'s archive, per trigger.', (b) => b.lastSizeBytes);
    storeGauge('backup_copy_last_success_timestamp_seconds', 'When each configured off-site target last took a copy of a backup, in seconds since 1970. Absent for a target that never did.', ['target'], (g, v) => {
      for (const [target, copy] of v.copies) if (copy.lastSuccess !== undefined) g.set({ target }, copy.lastSuccess);
    });
    storeGauge('backup_copy_last_failure_timestamp_seconds', 'When the newest failed attempt among the copies to each configured target that are still not made failed, in seconds since 1970. Absent when none is failing.', ['target'], (g, v) => {
      for (const [target, copy] of v.copies) if (copy.lastFailure !== undefined) g.set({ target }, copy.lastFailure);
    });
    storeGauge('backup_copies', 'Copies of backups to each configured off-site target, by status (pending: not tried yet; failed: tried and to be retried; copied).', ['target', 'status'], (g, v) => {
      for (const [target, copy] of v.copies) {
        g.set({ target, status: 'pending' }, copy.pending);
        g.set({ target, status: 'failed' }, copy.failed);
        g.set({ target, status: 'copied' }, copy.copied);
      }
    });
    storeGauge('notification_deliveries', 'Notification deliveries in the outbox, by status: pending (the backlog, including those being retried), delivered, failed (given up).', ['status'], (g, v) => {
      g.set({ status: 'pending' }, v.deliveries.pending);
      g.set({ status: 'delivered' }, v.deliveries.delivered);
      g.set({ status: 'failed' }, v.deliveries.failed);
    });
    storeGauge('attention', 'The counts of GET /api/attention, by list (licenses_expiring_7d, licenses_expiring_30d, licenses_expired_7d, licenses_at_machine_limit, licenses_usage_high, deliveries_failed, deliveries_retrying): the records each of its links lists. The lists overlap (take one, never the sum).', ['list'], (g, v) => {
      for (const [list, count] of Object.entries(v.attention)) g.set({ list }, count);
    });
    storeGauge('signing_key_age_seconds', 'Age of the active signing key (since it was created). Absent before the first key.', [], (g, v) => {
      if (v.signingKey) g.set(v.signingKey.ageSeconds);
    });
    storeGauge('signing_key_sealed', '1 when the active signing key\'s private half is stored sealed under the key-encryption key, else 0.', [], (g, v) => {
      if (v.signingKey) g.set(v.signingKey.sealed ? 1 : 0);
    });
  }
}
