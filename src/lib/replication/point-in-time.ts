import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ResolvedConfig } from '../config/resolve.js';
import type { OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { replicaAgeKeys } from './age-identity.js';
import { findLitestream } from './litestream-binary.js';
import { litestreamConfig } from './litestream-config.js';

/** Where a replica's state at a moment comes from: its newest snapshot before it, replayed to the last WAL segment before it. */
export interface ReplicaMoment {
  readonly target: string;
  /** The moment asked for. */
  readonly to_time: string;
  readonly generation: string;
  readonly snapshot: { readonly index: number; readonly created_at: string };
  /** When the newest WAL segment replayed was written: the state is the database's as of then (second precision). */
  readonly state_at: string;
  /** The oldest and newest moments this replica can restore to now. */
  readonly available: { readonly from: string; readonly to: string };
}

/**
 * Where a point-in-time restore's config.yaml comes from: the replica holds the database only
 * (notification settings included: they are its tables), so the configuration is taken from
 * the backup archive nearest the moment (the newest made at or before it, else the oldest
 * after), or this host's when backup.path holds none that can be read.
 */
export type ConfigurationSource =
  | { readonly from: 'backup'; readonly backup_id: string; readonly created_at: string }
  | { readonly from: 'this host'; readonly reason: string };

export interface ReplicaArchive {
  readonly moment: ReplicaMoment;
  readonly configuration: ConfigurationSource;
  /** A backup archive of that state, in a private scratch directory: restore it as any archive (restore.ts). */
  readonly archive: string;
  /** Removes the scratch directory and everything in it. */
  dispose(): Promise<void>;
}

export interface ReplicaArchiveOptions {
  readonly config: ResolvedConfig;
  readonly target: string;
  readonly toTime: Date;
  readonly toolVersion: string;
  readonly context: OperationContext;
  /** Where the target's `*_env` credentials are read. */
  readonly environment: Readonly<Record<string, string | undefined>>;
}

/**
 * Restores the replica on `target` as it was at `toTime` (Litestream's `restore -timestamp`)
 * into a private scratch directory, never into backup.path, and packs it as a backup
 * archive with the configuration of the backup nearest that moment, so that the restore that follows is any archive's
 * restore: the same integrity, schema and signing-key checks, the same pre-restore backup and
 * swap, and the same refusal of another server's keys without their confirmation.
 */
export async function replicaArchiveAt(options: ReplicaArchiveOptions): Promise<ReplicaArchive> {
  const restored = await restoreReplica(options);
  try {
    const nearest = await nearestConfiguration(options.config, options.toTime, path.join(restored.scratch, 'nearest'));
    const archive = await packAsArchive(restored.file, path.join(restored.scratch, 'backups'), options, nearest.file);
    return { moment: restored.moment, configuration: nearest.source, archive, dispose: restored.dispose };
  } catch (error) {
    await restored.dispose();
    throw error;
  }
}

export interface RestoredReplica {
  readonly moment: ReplicaMoment;
  /** The restored SQLite file, in `scratch`. */
  readonly file: string;
  /** A private scratch directory (0700) that holds the file. */
  readonly scratch: string;
  /** Removes the scratch directory and everything in it. */
  dispose(): Promise<void>;
}

/**
 * Restores the replica on `target` into a private scratch directory with Litestream's own
 * `restore`: as it was at `toTime`, or without it as it is now (its newest WAL segment).
 */
export async function restoreReplica(options: Omit<ReplicaArchiveOptions, 'toTime' | 'toolVersion' | 'context'> & { readonly toTime?: Date }): Promise<RestoredReplica> {
  const { config } = options;
  const replication = config.settings.backup.replication;
  const target = replication?.targets.find((candidate) => candidate.name === options.target);
  if (!replication || !target) {
    throw new LicenseServerError('TARGET_NOT_CONFIGURED', `no replicated target is named ${JSON.stringify(options.target.slice(0, 40))}; ${replication ? `backup.replication.targets lists ${replication.targets.map((candidate) => candidate.name).join(', ')}` : 'backup.replication.targets is not set'}`);
  }
  const { binary } = await findLitestream(replication.litestream);
  const scratch = await mkdtemp(path.join(tmpdir(), 'license-server-replica-'));
  const dispose = () => rm(scratch, { recursive: true, force: true });
  try {
    const databasePath = config.settings.database.url;
    const written = await litestreamConfig({
      databasePath,
      replication: { ...replication, targets: [target] },
      age: config.settings.backup.encryptionKey ? replicaAgeKeys(config.settings.backup.encryptionKey) : undefined,
      parentPid: process.pid,
      environment: options.environment,
    });
    const configFile = path.join(scratch, 'litestream.yml');
    await writeFile(configFile, written.yaml, { mode: 0o600 });
    const litestream = (args: string[]) => runLitestream(binary, [...args.slice(0, 1), '-config', configFile, ...args.slice(1)], written.env);
    // Listed before the restore, which may reach a segment or two newer than they name.
    const moment = chooseMoment(target.name, options.toTime ?? new Date(), await litestream(['snapshots', databasePath]), await litestream(['wal', databasePath]));
    const file = path.join(scratch, 'restored.db');
    await litestream(['restore', ...(options.toTime ? ['-timestamp', options.toTime.toISOString()] : []), '-o', file, databasePath]);
    return { moment, file, scratch, dispose };
  } catch (error) {
    await dispose();
    throw error;
  }
}

/**
 * The config.yaml of the backup archive nearest `toTime` in backup.path, read back whole
 * (every chunk authenticated, as a restore reads it) into `scratch`.
 */
async function nearestConfiguration(config: ResolvedConfig, toTime: Date, scratch: string): Promise<{ source: ConfigurationSource; file: string | undefined }> {
  const [{ listBackups }, { verifyArchive }] = await Promise.all([import('../backup/repository.js'), import('../backup/archive/verify.js')]);
  const backups = await listBackups(config.settings.backup.path).catch(() => []);
  const at = (record: { created_at: string }) => Date.parse(record.created_at);
  const before = backups.filter((record) => at(record) <= toTime.getTime()).sort((a, b) => at(b) - at(a));
  const after = backups.filter((record) => at(record) > toTime.getTime()).sort((a, b) => at(a) - at(b));
  const nearest = before[0] ?? after[0];
  if (!nearest) return { source: { from: 'this host', reason: `backup.path holds no backup archive` }, file: undefined };
  try {
    await mkdir(scratch, { mode: 0o700 });
    const archive = await verifyArchive(path.join(config.settings.backup.path, nearest.file), { key: config.settings.backup.encryptionKey, extractTo: scratch });
    const file = archive.files.get('config/config.yaml');
    if (!file) return { source: { from: 'this host', reason: `the nearest backup, ${nearest.backup_id}, holds no config.yaml` }, file: undefined };
    return { source: { from: 'backup', backup_id: nearest.backup_id, created_at: nearest.created_at }, file };
  } catch (error) {
    const reason = error instanceof LicenseServerError ? `${error.code}: ${error.message}` : String(error);
    return { source: { from: 'this host', reason: `the nearest backup, ${nearest.backup_id}, cannot be read (${reason.slice(0, 200)})` }, file: undefined };
  }
}

/** Makes a backup archive of the restored file, as `backup create` would of a store there, with `configFile` as its config.yaml. */
async function packAsArchive(file: string, directory: string, options: ReplicaArchiveOptions, configFile: string | undefined): Promise<string> {
  const [{ openDatabase }, { createBackup }] = await Promise.all([import('../storage/open.js'), import('../backup/create.js')]);
  // createBackup creates only backup.path itself: a directory given to it must exist.
  await mkdir(directory, { mode: 0o700 });
  const config: ResolvedConfig = {
    ...options.config,
    ...(configFile ? { configFile } : {}),
    settings: { ...options.config.settings, database: { ...options.config.settings.database, url: file } },
  };
  const db = await openDatabase(file, { create: false, keyEncryptionKey: config.settings.signing.keyEncryptionKey });
  try {
    const record = await createBackup({ db, config, trigger: 'manual', toolVersion: options.toolVersion, context: options.context, directory });
    return path.join(directory, record.file);
  } finally {
    await db.close();
  }
}

interface Row { readonly generation: string; readonly index: number; readonly created: Date }

/**
 * The moment Litestream will restore to, from its own listings (`litestream snapshots` and
 * `wal`, whose times have second precision): the newest snapshot made at or before the
 * moment, in its generation the newest WAL segment made at or before it.
 */
export function chooseMoment(target: string, toTime: Date, snapshotsText: string, walText: string): ReplicaMoment {
  const snapshots = readTable(snapshotsText, target);
  const segments = readTable(walText, target);
  const all = [...snapshots, ...segments].map((row) => row.created.getTime());
  if (snapshots.length === 0) throw unavailable(`the replica on ${target} holds no snapshot yet`);
  const available = { from: new Date(Math.min(...snapshots.map((row) => row.created.getTime()))).toISOString(), to: new Date(Math.max(...all)).toISOString() };
  const before = snapshots.filter((row) => row.created.getTime() <= toTime.getTime()).sort((a, b) => a.created.getTime() - b.created.getTime());
  const snapshot = before.at(-1);
  if (!snapshot) throw unavailable(`the replica on ${target} holds nothing as early as ${toTime.toISOString()}: it can restore to ${available.from} through ${available.to}`);
  const replayed = segments
    .filter((row) => row.generation === snapshot.generation && row.index >= snapshot.index && row.created.getTime() <= toTime.getTime())
    .map((row) => row.created.getTime());
  return {
    target,
    to_time: toTime.toISOString(),
    generation: snapshot.generation,
    snapshot: { index: snapshot.index, created_at: snapshot.created.toISOString() },
    state_at: new Date(Math.max(snapshot.created.getTime(), ...replayed)).toISOString(),
    available,
  };
}

/** Litestream's listings: a header line, then columns split by spaces; `created` is the last. */
function readTable(text: string, replica: string): Row[] {
  const [header, ...lines] = text.split('\n').filter((line) => line.trim() !== '');
  const names = (header ?? '').trim().split(/\s+/);
  const column = (name: string) => names.indexOf(name);
  return lines.map((line) => line.trim().split(/\s+/)).filter((cells) => cells[column('replica')] === replica).map((cells) => ({
    generation: cells[column('generation')]!,
    index: Number(cells[column('index')]),
    created: new Date(cells[column('created')]!),
  })).filter((row) => /^[0-9a-f]{16}$/.test(row.generation) && Number.isSafeInteger(row.index) && !Number.isNaN(row.created.getTime()));
}

function runLitestream(binary: string, args: string[], env: Readonly<Record<string, string>>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(binary, args, { env: { ...env }, timeout: 30 * 60_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      // Litestream's last line says why (its JSON log, or "error: ..."); never the environment.
      const last = stderr.trim().split('\n').at(-1) ?? '';
      let reason = last;
      try {
        const parsed = JSON.parse(last) as { msg?: string; error?: string };
        reason = [parsed.msg, parsed.error].filter(Boolean).join(': ');
      } catch {
        // Not JSON: the plain line.
      }
      if (/no matching backups|no snapshots available|no generation/i.test(reason)) return reject(unavailable(`the replica has nothing to restore: ${reason.slice(0, 200)}`));
      reject(new LicenseServerError('REPLICATION_UNAVAILABLE', `litestream ${args[0]} failed: ${reason.slice(0, 300) || (error as NodeJS.ErrnoException).code || 'no reason given'}`));
    });
  });
}

function unavailable(message: string): LicenseServerError {
  return new LicenseServerError('REPLICA_MOMENT_UNAVAILABLE', message);
}
