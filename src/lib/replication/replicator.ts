import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { writeFileDurably } from '../files/durable-write.js';
import { replicaAgeKeys } from './age-identity.js';
import { findLitestream } from './litestream-binary.js';
import { litestreamConfig } from './litestream-config.js';
import { ReplicaLag } from './replica-lag.js';
import { localPosition, readLogLine, type WalPosition } from './replica-position.js';
import type { ReplicationSettings } from './settings.js';
import { writeReplicationStatus } from './status-file.js';

export interface ReplicatorOptions {
  readonly databasePath: string;
  readonly settings: ReplicationSettings;
  readonly backupKey: Uint8Array | undefined;
  /** Where the targets' `*_env` credentials are read, and PATH for Litestream's own child. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** serve's pid: Litestream ends when it is gone. */
  readonly parentPid: number;
  readonly log: (entry: Record<string, unknown>) => void;
  /** Called once when a replica's lag passes the stall threshold, again only after it caught up. */
  readonly onStalled?: (replica: string, lagSeconds: number, lastError: string | undefined) => void;
  readonly now?: () => number;
}

export interface ReplicaStatus {
  readonly target: string;
  /** Where the replica is, as `generation/index:offset`; null until known. */
  readonly position: string | null;
  /** Seconds the replica has been behind the database; 0 when it holds everything, null while unknown. */
  readonly lag_seconds: number | null;
  readonly caught_up_at: string | null;
  readonly errors: number;
  readonly last_error: { readonly at: string; readonly message: string } | null;
}

export interface ReplicationStatus {
  readonly state: 'replicating' | 'restarting' | 'paused' | 'stopped';
  readonly litestream_version: string;
  readonly pid: number | null;
  readonly started_at: string | null;
  /** Times serve started Litestream again after it died. */
  readonly restarts: number;
  readonly local_position: string | null;
  /** When Litestream last copied the database's WAL into its shadow WAL (about every second); null since a start until it has. */
  readonly local_synced_at: string | null;
  readonly replicas: readonly ReplicaStatus[];
}

interface ReplicaState {
  position: WalPosition | undefined;
  behindSince: number | undefined;
  caughtUpAt: number | undefined;
  errors: number;
  lastError: { at: number; message: string } | undefined;
  stalled: boolean;
  /** When the upload under way began; undefined when none is. */
  uploadingSince: number | undefined;
}

const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 60_000;
/** A run this long counts as healthy: the next death restarts after the first backoff again. */
const HEALTHY_RUN_MS = 60_000;
const POLL_MS = 1000;

/**
 * Runs Litestream beside serve, as its child: writes its configuration (secrets only in its
 * environment), restarts it with backoff when it dies, stops it for a restore and starts it
 * again afterwards (with a fresh shadow WAL, so that the restored database starts a new
 * generation and is replicated: Litestream #781), and tracks each replica's lag.
 *
 * Lag is read from Litestream's own log and files: where each replica is, from the lines
 * replica-position.ts reads (at each start Litestream logs where it found the replica, then
 * each segment it uploads), and how far the database is, from the shadow WAL beside it once
 * Litestream has copied the WAL into it since its start. A replica is behind since the oldest
 * look that found the database further than the replica is now (replica-lag.ts).
 */
export class Replicator {
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private state: ReplicationStatus['state'] = 'stopped';
  private startedAt: number | undefined;
  private restarts = 0;
  private backoffMs = FIRST_BACKOFF_MS;
  private restartTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private local: WalPosition | undefined;
  /** When Litestream last copied the WAL into the shadow WAL since it (re)started: the shadow is current as of then. */
  private shadowSyncedAt: number | undefined;
  private readonly replicas = new Map<string, ReplicaState>();
  private readonly now: () => number;
  private recording: Promise<void> | undefined;
  private recordFailing = false;
  private readonly lag = new ReplicaLag();

  private constructor(
    private readonly options: ReplicatorOptions,
    private readonly binary: string,
    readonly version: string,
    private readonly configFile: string,
    private readonly secrets: Readonly<Record<string, string>>,
  ) {
    this.now = options.now ?? Date.now;
    for (const target of options.settings.targets) {
      this.replicas.set(target.name, { position: undefined, behindSince: undefined, caughtUpAt: undefined, errors: 0, lastError: undefined, stalled: false, uploadingSince: undefined });
    }
  }

  /** Finds Litestream and writes its configuration beside the database (mode 0600); starts nothing. */
  static async prepare(options: ReplicatorOptions): Promise<Replicator> {
    const { binary, version } = await findLitestream(options.settings.litestream);
    const config = await litestreamConfig({
      databasePath: options.databasePath,
      replication: options.settings,
      age: options.backupKey ? replicaAgeKeys(options.backupKey) : undefined,
      parentPid: options.parentPid,
      environment: options.environment,
    });
    const configFile = `${options.databasePath}.litestream.yml`;
    await writeFileDurably(configFile, config.yaml, { overwrite: true, mode: 0o600 });
    return new Replicator(options, binary, version, configFile, config.env);
  }

  start(): void {
    if (this.child || this.restartTimer) return;
    this.spawnChild();
    this.pollTimer ??= setInterval(() => void this.poll(), POLL_MS).unref();
  }

  /** Stops Litestream and waits for it to exit (SIGTERM, then SIGKILL after 5 s). */
  async stop(state: 'paused' | 'stopped' = 'stopped'): Promise<void> {
    this.state = state;
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    if (state === 'stopped') {
      clearInterval(this.pollTimer);
      this.pollTimer = undefined;
    }
    const child = this.child;
    if (child) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await this.exited;
      clearTimeout(killer);
    }
    await this.record();
  }

  /** For a restore: Litestream must not copy the file while it is swapped. */
  pause(): Promise<void> {
    return this.stop('paused');
  }

  /**
   * Runs `work` with Litestream stopped, then starts it again on a new generation (resume):
   * for a checkpoint that must reach the end of the WAL, which Litestream's read lock forbids.
   * Writes made meanwhile reach the replica with the new generation's snapshot.
   */
  async whilePaused<T>(work: () => Promise<T>): Promise<T> {
    if (this.state !== 'replicating' && this.state !== 'restarting') return work();
    await this.pause();
    try {
      return await work();
    } finally {
      await this.resume();
    }
  }

  /**
   * After a restore (or a failed one): drops the shadow WAL, whose generation described the
   * old file, and starts Litestream again, which begins a new generation from the restored one.
   */
  async resume(): Promise<void> {
    if (this.state !== 'paused') return;
    const meta = path.join(path.dirname(this.options.databasePath), `.${path.basename(this.options.databasePath)}-litestream`);
    await rm(meta, { recursive: true, force: true });
    this.local = undefined;
    this.lag.clear();
    this.backoffMs = FIRST_BACKOFF_MS;
    this.spawnChild();
  }

  status(): ReplicationStatus {
    const now = this.now();
    return {
      state: this.state,
      litestream_version: this.version,
      pid: this.child?.pid ?? null,
      started_at: this.startedAt === undefined ? null : new Date(this.startedAt).toISOString(),
      restarts: this.restarts,
      local_position: this.local ? formatPosition(this.local) : null,
      local_synced_at: this.shadowSyncedAt === undefined ? null : new Date(this.shadowSyncedAt).toISOString(),
      replicas: [...this.replicas].map(([target, replica]) => ({
        target,
        position: replica.position ? formatPosition(replica.position) : null,
        lag_seconds: this.lagOf(replica, now),
        caught_up_at: replica.caughtUpAt === undefined ? null : new Date(replica.caughtUpAt).toISOString(),
        errors: replica.errors,
        last_error: replica.lastError ? { at: new Date(replica.lastError.at).toISOString(), message: replica.lastError.message } : null,
      })),
    };
  }

  private lagOf(replica: ReplicaState, now: number): number | null {
    if (replica.behindSince !== undefined) return Math.round((now - replica.behindSince) / 100) / 10;
    return replica.caughtUpAt === undefined ? null : 0;
  }

  private spawnChild(): void {
    this.restartTimer = undefined;
    const startedAt = this.now();
    this.startedAt = startedAt;
    // What the last run knew may be stale: each replica's place is read again from the target.
    this.shadowSyncedAt = undefined;
    for (const replica of this.replicas.values()) {
      replica.position = undefined;
      replica.uploadingSince = undefined;
    }
    // Only what Litestream needs: the daemon's own environment holds its admin token and keys.
    const environment: Record<string, string> = { ...this.secrets };
    if (this.options.environment.PATH) environment.PATH = this.options.environment.PATH;
    const child = spawn(this.binary, ['replicate', '-config', this.configFile], { stdio: ['ignore', 'ignore', 'pipe'], env: environment });
    this.child = child;
    this.exited = new Promise<void>((resolve) => {
      const ended = (code: number | null, signal: NodeJS.Signals | null) => {
        if (this.child !== child) return;
        this.child = undefined;
        resolve();
        this.onExit(code, signal, startedAt);
      };
      child.once('exit', ended);
      // A binary gone since the start (spawn fails: no 'exit' follows) is a death like any other.
      child.once('error', (error) => {
        this.options.log({ level: 'error', msg: 'cannot start litestream', error: error.message.slice(0, 200) });
        if (child.pid === undefined) ended(null, null);
      });
    });
    createInterface({ input: child.stderr! }).on('line', (line) => this.onLogLine(line));
    this.state = 'replicating';
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null, startedAt: number): void {
    if (this.state === 'paused' || this.state === 'stopped') return;
    const ranMs = this.now() - startedAt;
    if (ranMs >= HEALTHY_RUN_MS) this.backoffMs = FIRST_BACKOFF_MS;
    this.options.log({ level: 'warn', msg: 'litestream exited; restarting', code, signal, restart_in_ms: this.backoffMs });
    this.restarts += 1;
    this.state = 'restarting';
    this.restartTimer = setTimeout(() => this.spawnChild(), this.backoffMs);
    this.restartTimer.unref();
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
  }

  private onLogLine(line: string): void {
    const event = readLogLine(line);
    if (!event) return;
    const now = this.now();
    if (event.kind === 'written' || event.kind === 'replica-found') {
      const replica = this.replicas.get(event.replica);
      if (replica) {
        replica.position = event.position;
        replica.uploadingSince = undefined;
      }
      return;
    }
    if (event.kind === 'uploading') {
      const replica = this.replicas.get(event.replica);
      if (replica) replica.uploadingSince ??= now;
      return;
    }
    if (event.kind === 'database-synced') {
      this.shadowSyncedAt = now;
      return;
    }
    if (event.kind === 'error') {
      const replicas = event.replica === undefined ? [...this.replicas.values()] : [this.replicas.get(event.replica)].filter((found) => found !== undefined);
      for (const replica of replicas) {
        replica.errors += 1;
        replica.lastError = { at: now, message: event.message };
        replica.uploadingSince = undefined;
      }
      this.options.log({ level: 'error', msg: 'litestream', ...(event.replica ? { target: event.replica } : {}), error: event.message });
      return;
    }
    if (event.level === 'WARN' || ['sync: new generation', 'snapshot written', 'litestream shut down'].includes(event.message)) {
      this.options.log({ level: event.level === 'WARN' ? 'warn' : 'info', msg: `litestream: ${event.message}` });
    }
  }

  /**
   * Litestream 0.3.13 can hang for good on an upload that failed early: its copy writes into
   * a pipe that the failed upload no longer reads (a file target whose directory cannot be
   * made, seen in test/commands/replication.test.ts). It logs nothing and retries nothing, so
   * an upload that runs too long is ended here: Litestream is killed, counted as an error of
   * the target, and started again by onExit, and retries from where the replica is.
   */
  private killHungUpload(now: number): void {
    const limit = hungUploadMs(this.options.settings);
    const child = this.child;
    if (!child || this.state !== 'replicating') return;
    const hung = [...this.replicas].filter(([, replica]) => replica.uploadingSince !== undefined && now - replica.uploadingSince > limit);
    if (hung.length === 0) return;
    for (const [name, replica] of hung) {
      replica.errors += 1;
      replica.lastError = { at: now, message: `an upload to ${name} ran ${Math.round((now - replica.uploadingSince!) / 1000)} s without an answer; Litestream was restarted` };
      replica.uploadingSince = undefined;
      this.options.log({ level: 'warn', msg: 'litestream upload hung; restarting litestream', target: name, limit_s: limit / 1000 });
    }
    child.kill('SIGKILL');
  }

  private async poll(): Promise<void> {
    await this.track();
    await this.record();
  }

  /**
   * For `backup status` on the command line, which runs without the daemon (status-file.ts).
   * One write at a time; a call during one is written right after it, so a stop's last state
   * is never dropped for a poll's.
   */
  private record(): Promise<void> {
    this.recording = (this.recording ?? Promise.resolve()).then(async () => {
      try {
        await writeReplicationStatus(this.options.databasePath, this.status(), { pid: this.options.parentPid, at: new Date(this.now()) });
        this.recordFailing = false;
      } catch (error) {
        // Once per run of failures, not every second.
        if (!this.recordFailing) this.options.log({ level: 'warn', msg: 'cannot record the replication status for backup status', error: String(error).slice(0, 200) });
        this.recordFailing = true;
      }
    });
    return this.recording;
  }

  private async track(): Promise<void> {
    const local = await localPosition(this.options.databasePath);
    const now = this.now();
    this.killHungUpload(now);
    if (!local) return;
    this.local = local;
    this.lag.observe(now, local);
    for (const [name, replica] of this.replicas) {
      const known = this.state === 'replicating' && this.shadowSyncedAt !== undefined && replica.position !== undefined;
      const since = known ? this.lag.behindSince(replica.position!) : (replica.behindSince ?? now);
      if (since === undefined) {
        replica.behindSince = undefined;
        replica.caughtUpAt = now;
        replica.stalled = false;
        continue;
      }
      replica.behindSince = since;
      const lagSeconds = (now - replica.behindSince) / 1000;
      if (!replica.stalled && lagSeconds * 1000 >= stallThresholdMs(this.options.settings)) {
        replica.stalled = true;
        this.options.onStalled?.(name, Math.round(lagSeconds), replica.lastError?.message);
      }
    }
    this.lag.forget([...this.replicas.values()].map((replica) => replica.position));
  }
}

/** How long an upload may run before serve takes Litestream for hung: 10 sync intervals, at least 30 s. */
export function hungUploadMs(settings: Pick<ReplicationSettings, 'syncIntervalMs'>): number {
  return Math.max(30_000, 10 * settings.syncIntervalMs);
}

/** How far behind a replica may fall before it counts as stalled: 10 sync intervals, at least a minute. */
export function stallThresholdMs(settings: Pick<ReplicationSettings, 'syncIntervalMs'>): number {
  return Math.max(60_000, 10 * settings.syncIntervalMs);
}

function formatPosition(position: WalPosition): string {
  return `${position.generation}/${position.index.toString(16).padStart(8, '0')}:${position.offset}`;
}
