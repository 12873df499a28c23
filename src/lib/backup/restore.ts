import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { recordAudit } from '../audit.js';
import { raiseEvent } from '../notifications/outbox.js';
import type { ResolvedConfig } from '../config/resolve.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { syncDirectory, syncFile, writeFileDurably } from '../files/durable-write.js';
import { asWriteFailure } from '../fs-errors.js';
import { isPostgresUrl, openDatabase } from '../storage/open.js';
import type { Database, Engine } from '../storage/types.js';
import type { Queryable, Row, SqlValue } from '../storage/types.js';
import type { Progress } from './archive/archive.js';
import { createBackup } from './create.js';
import { lockOutDaemons, type DaemonLock } from './locks/daemon-lock.js';
import type { ConvertedTables } from './engines/cross-engine/sqlite-to-postgres.js';
import { acquireBackupLock } from './locks/lock.js';
import type { Manifest } from './archive/manifest.js';
import type { PostgresRestore } from './engines/postgres-restore.js';
import type { BackupRecord } from './repository.js';
import { checkCompatible, refuseUnconfirmedKeyReplacement, sqliteSigningKeys } from './restore-checks.js';
import { openRestoreSource, removeEmptyDirectories, type RestoreSource } from './restore-source.js';
import { CARRIED_TABLES, RevocationCarry, type CarriedRevocations, type CarryTables } from './revocations.js';
import { SigningKeyCarry, type CarriedSigningKeys } from './signing-key-carry.js';
import { mergeRestoredConfig } from './settings-export.js';
import { checkSqlite } from './engines/sqlite-snapshot.js';
import { verifyArchive, type EntryConsumers } from './archive/verify.js';
import { ownedWorkPrefix, ownerOfWork, ownerState } from './locks/work-owner.js';

export interface RestoreOptions {
  readonly config: ResolvedConfig;
  /** A backup id, or (without `target` or `source`) the path of an archive file. */
  readonly reference: string;
  readonly toolVersion: string;
  readonly context: OperationContext;
  readonly directory?: string;
  /** A name under backup.targets: the backup is downloaded from there into a staging area first (restore-source.ts). */
  readonly target?: string;
  /** The archive, opened by the caller (the daemon downloads before it pauses); the caller disposes of it. */
  readonly source?: RestoreSource;
  /**
   * Let another server's backup replace this server's signing keys and admin tokens. Never
   * implied by the confirmation of the restore itself: without it such a backup is refused
   * (RESTORE_KEYS_NOT_CONFIRMED), however it came (by id, path or target).
   */
  readonly replaceKeys?: boolean;
  readonly onPhase?: (phase: 'download' | 'validate' | 'convert' | 'safety-backup' | 'restore', totalBytes?: number) => void;
  readonly onProgress?: Progress;
  /** Set by the daemon restoring its own database: it has stopped serving meanwhile. */
  readonly inDaemon?: boolean;
  /** That daemon's lock: made exclusive for the restore, so that no other daemon serves the database. */
  readonly daemonLock?: DaemonLock;
  /** Called after the pre-restore backup, before the swap: the daemon closes its database here. */
  readonly beforeSwap?: () => Promise<void>;
  /**
   * Keep licenses and customers deactivated in the replaced database deactivated (default
   * true); false restores them as the backup has them. Revoked admin tokens stay revoked
   * either way.
   */
  readonly keepRevocations?: boolean;
  /** Restore into a PostgreSQL database that also holds tables that are not ours. */
  readonly force?: boolean;
}

/** A backup restored onto the other engine: what was moved where. */
export interface EngineMove {
  readonly from: Engine;
  readonly to: Engine;
  /** Rows per table as the backup had them, before any migration. */
  readonly rows: Readonly<Record<string, number>>;
}

export interface RestoreReport {
  readonly backup_id: string;
  readonly engine: string;
  /** The schema version of the backup, and of the database after any migration. */
  readonly schema_version: number;
  readonly migrated_to: number;
  /** The backup of the state just replaced, or null when there was no database yet. */
  readonly pre_restore_backup_id: string | null;
  /** Where the replaced config.yaml was kept, when the backup carried one. */
  readonly replaced_config: string | null;
  /** What was revoked in the replaced database and active in the backup (see RevocationCarry). */
  readonly revocations: CarriedRevocations;
  /** The signing keys whose state the restore changed, and whether the backup was another server's (see SigningKeyCarry). */
  readonly signing_keys: RestoredSigningKeys;
  /**
   * Why this host cannot sign with the restored keys, or null when it can: they are sealed
   * and signing.key_encryption_key is unset here or another key (the restore itself stands;
   * set the key-encryption key the backup's keys were sealed with).
   */
  readonly signing_key_warning: string | null;
  /**
   * Set when the backup was made on the other engine and converted (database.url is left
   * as it was: a restore never switches engines by itself); null for a same-engine restore.
   */
  readonly moved: EngineMove | null;
}

/**
 * Restores a backup (spec 4.4): validate it whole first; refuse one from a newer schema, one
 * while a daemon uses the database, and another server's without `replaceKeys`; take a
 * pre-restore backup of the current state; then swap. SQLite: the validated snapshot is
 * integrity-checked, fsynced and renamed over the database after the old one's WAL was
 * checkpointed away, so the file is at every moment either the old database or the new one.
 * PostgreSQL: one transaction. Older schemas are migrated after the swap; the configuration
 * file is replaced (the old one kept beside it) with this host's secrets carried over.
 * Revocations made after the backup are carried over inside the swap (RevocationCarry).
 *
 * On a host with no SQLite database yet, nothing is made outside the staging areas (no lock
 * files beside the database to be) until the backup has passed every check, and a restore
 * that fails removes the directories it made: a refused restore on a new host leaves the data
 * directory as it found it.
 */
export async function restoreBackup(options: RestoreOptions): Promise<RestoreReport> {
  const { config, context } = options;
  const { settings } = config;
  const url = settings.database.url;
  const directory = path.resolve(options.directory ?? settings.backup.path);
  const postgres = isPostgresUrl(url);
  const stagingParent = postgres ? directory : path.dirname(url);
  const fresh = !postgres && !options.inDaemon && !(await exists(url));
  /** Directories this restore made (deepest, and the first of them mkdir -p made): removed again, when empty, if it fails. */
  const made: Array<{ deepest: string; first: string }> = [];
  const makeDirectory = async (target: string) => {
    const first = await mkdir(target, { recursive: true, mode: 0o700 }).catch((error: unknown) => {
      throw asWriteFailure(error, `cannot create the directory ${target}`);
    });
    if (first) made.push({ deepest: target, first });
  };
  let release: (() => Promise<void>) | undefined;
  let releaseDaemons: (() => Promise<void>) | undefined;
  let releaseKeys: (() => void) | undefined;
  let staging: string | undefined;
  let source = options.source;
  const ownSource = source === undefined;
  let restored = false;
  const lockBackups = async () => {
    release = await acquireBackupLock(directory, 'restore', now(context), url);
  };
  // The check for daemons takes their lock, and keeps it to the end: a daemon that starts
  // from here on waits for the restore instead of opening the data being replaced.
  const lockDaemons = async () => {
    if (options.daemonLock) releaseDaemons = await options.daemonLock.excludeOtherDaemons();
    else if (!options.inDaemon) releaseDaemons = await lockOutDaemons(url);
  };
  try {
    // On a new host the backup directory may not exist yet; the pre-restore backup goes there too.
    await makeDirectory(directory);
    if (!fresh) await lockBackups();
    source ??= await openRestoreSource({
      config,
      reference: options.reference,
      directory,
      ...(options.target === undefined ? {} : { target: options.target }),
      onDownload: (size) => options.onPhase?.('download', size),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    const { file, record, target: fromTarget } = source;
    if (postgres) await (await import('./engines/postgres-target.js')).checkPostgresTarget(url, { force: options.force });
    options.onPhase?.('validate', (await stat(file)).size);
    await makeDirectory(stagingParent);
    // A restore killed earlier left its staging directory; one whose maker is gone is removed
    // (a live restore through another backup directory may be staging beside a SQLite file).
    for (const name of await readdir(stagingParent)) {
      const owner = name.startsWith('.restore-') ? ownerOfWork(name) : undefined;
      if (owner ? ownerState(owner) === 'gone' : name.startsWith('.restore-')) await rm(path.join(stagingParent, name), { recursive: true, force: true });
    }
    staging = await mkdtemp(path.join(stagingParent, ownedWorkPrefix('restore')));
    if (!fresh) await lockDaemons();
    const carry = new RevocationCarry(options.keepRevocations ?? true);
    const keys = new SigningKeyCarry({ replaceKeys: options.replaceKeys === true });
    releaseKeys = () => keys.dispose();
    let safety: BackupRecord | undefined;
    // A PostgreSQL backup restored into PostgreSQL is loaded while the archive is read and
    // checked, beside the old tables inside the restore's transaction; only after the whole
    // archive has passed are the pre-restore backup taken and the tables swapped: a damaged
    // backup still changes nothing and leaves no backup behind, and the load no longer waits
    // for a separate pass over the archive (and a staged copy of the dump) to finish.
    let streamed: PostgresRestore | undefined;
    const startStreamedRestore = async (manifest: Manifest): Promise<EntryConsumers | undefined> => {
      checkCompatible(manifest);
      if (!postgres || manifest.engine !== 'postgres') return undefined;
      const { openPostgresRestore } = await import('./engines/postgres-restore.js');
      const restore = await openPostgresRestore(url, carry, keys, now(context));
      streamed = restore;
      return { 'database/postgres.sql': (content) => restore.load(content) };
    };
    let archive;
    try {
      archive = await verifyArchive(file, {
        key: settings.backup.encryptionKey,
        extractTo: staging,
        onProgress: options.onProgress,
        expected: record,
        onManifest: startStreamedRestore,
      });
      if (streamed) {
        await refuseUnconfirmedKeyReplacement(archive.manifest.backup_id, await streamed.signingKeys(), url, options.replaceKeys);
        options.onPhase?.('safety-backup');
        safety = await preRestoreBackup(options, directory);
        options.onPhase?.('restore');
        await options.beforeSwap?.();
        await streamed.commit();
      }
    } finally {
      // verifyArchive returns only once onManifest has settled, so an opened restore is here.
      await streamed?.close();
    }
    const { manifest } = archive;
    const target: Engine = postgres ? 'postgres' : 'sqlite';
    let converted: ConvertedTables | undefined;
    if (!streamed) {
      // The chunk tags and SHA-256 prove these are the very bytes that passed quick_check when
      // the backup was made; quick_check again guards the swap in seconds, where integrity_check
      // takes minutes on a large database (`backup validate` runs the full check).
      if (manifest.engine === 'sqlite') await checkSqlite(archive.files.get('database/sqlite.db')!, 'quick_check');
      // A backup of the other engine is converted now, before anything is replaced: a value the
      // target cannot store stops the restore here, with nothing changed.
      let database = archive.files.get(manifest.engine === 'sqlite' ? 'database/sqlite.db' : 'database/postgres.sql')!;
      if (manifest.engine !== target) {
        options.onPhase?.('convert');
        const { convertForEngine } = await import('./engines/cross-engine/convert.js');
        ({ converted, file: database } = await convertForEngine(manifest.engine, database, staging));
      }
      // The keys the backup's data holds: the SQLite snapshot, or the SQLite file a dump became.
      const backupKeys = await sqliteSigningKeys(manifest.engine === 'sqlite' ? archive.files.get('database/sqlite.db')! : database);
      await refuseUnconfirmedKeyReplacement(manifest.backup_id, backupKeys, url, options.replaceKeys);
      if (fresh) {
        // Everything that could refuse this backup has passed: now the locks, before anything is replaced.
        await lockBackups();
        await lockDaemons();
      }

      options.onPhase?.('safety-backup');
      safety = await preRestoreBackup(options, directory);

      options.onPhase?.('restore');
      await options.beforeSwap?.();
      if (postgres) {
        const { restorePostgres } = await import('./engines/postgres-restore.js');
        await restorePostgres(url, database, carry, keys, now(context));
      } else {
        await swapSqlite(url, database, carry, keys, now(context));
      }
    }
    restored = true;
    const moved = converted ? { from: manifest.engine, to: target, rows: converted.rows } : null;
    const revocations = carry.result;
    const db = await openDatabase(url, { keyEncryptionKey: settings.signing.keyEncryptionKey, timeouts: settings.database });
    let migratedTo: number;
    let signingKeyWarning: string | null = null;
    let signingKeys: RestoredSigningKeys;
    try {
      migratedTo = (await (await import('../storage/migrations.js')).migrate(db)).to;
      // A backup older than schema 5 gets its keys merged once migrated; the daemon lock is still held.
      if (!keys.applied) await db.transaction((tx) => keys.apply(tx, { current: true, at: now(context) }));
      const { erase, ...carried } = keys.result;
      const eraseWarning = erase ? await (await import('../signing-keys/erase.js')).eraseReplacedKeys(db, url) : null;
      signingKeys = { ...carried, erase_warning: eraseWarning };
      await db.transaction(async (tx) => {
        await recordAudit(tx, context, {
          action: 'backup.restored',
          entityType: 'backup',
          entityId: manifest.backup_id,
          details: { pre_restore_backup_id: safety?.backup_id ?? null, schema_version: manifest.schema_version, migrated_to: migratedTo, revocations, signing_keys: carried, moved, ...(fromTarget ? { target: fromTarget } : {}) },
        });
        // Raised in the restored store, whose rules and webhooks are now the ones in force.
        await raiseEvent(tx, 'backup.restored', { backup_id: manifest.backup_id, pre_restore_backup_id: safety?.backup_id ?? null, actor: context.actor }, context);
      });
      signingKeyWarning = await signingKeyProblem(db);
    } finally {
      await db.close();
    }
    const replacedConfig = archive.files.has('config/config.yaml')
      ? await restoreConfigFile(config, archive.files.get('config/config.yaml')!, now(context))
      : null;
    // A download becomes a listed backup only now that it has been restored. Failing to keep it
    // fails nothing: the restore has happened, and the backup is still on its target.
    await source.promote({ manifest, encrypted: archive.encrypted }, now(context)).catch(() => undefined);
    return {
      backup_id: manifest.backup_id,
      engine: manifest.engine,
      schema_version: manifest.schema_version,
      migrated_to: migratedTo,
      pre_restore_backup_id: safety?.backup_id ?? null,
      replaced_config: replacedConfig,
      revocations,
      signing_keys: signingKeys,
      signing_key_warning: signingKeyWarning,
      moved,
    };
  } catch (error) {
    // Staging, conversion and the SQLite swap write here; the pre-restore backup names its own directory.
    throw asWriteFailure(error, `cannot write into ${stagingParent} for the restore`);
  } finally {
    releaseKeys?.();
    if (staging) await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    if (ownSource) await source?.dispose();
    await releaseDaemons?.();
    await release?.();
    if (!restored) for (const { deepest, first } of made.reverse()) await removeEmptyDirectories(deepest, first);
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

/** RestoreReport.signing_keys: what SigningKeyCarry did, and whether the replaced key bytes are erased from the files. */
export interface RestoredSigningKeys extends Omit<CarriedSigningKeys, 'erase'> {
  /** Why a private key the restore deleted or replaced may remain in the database files (signing-keys/erase.ts), or null. */
  readonly erase_warning: string | null;
}

/** Whether the restored active key opens here (sealed keys need this host's key-encryption key). */
async function signingKeyProblem(db: Database): Promise<string | null> {
  const { loadKeyPair } = await import('../signing-keys/keys.js');
  try {
    (await loadKeyPair(db)).secretKey.fill(0);
    return null;
  } catch (error) {
    if (error instanceof LicenseServerError && ['SIGNING_KEK_REQUIRED', 'SIGNING_KEK_WRONG', 'SIGNING_KEY_DAMAGED'].includes(error.code)) return error.message;
    if (error instanceof LicenseServerError && error.code === 'SIGNING_KEY_MISSING') return null;
    throw error;
  }
}

async function preRestoreBackup(options: RestoreOptions, directory: string): Promise<BackupRecord | undefined> {
  const url = options.config.settings.database.url;
  if (!isPostgresUrl(url)) {
    try {
      await stat(url);
    } catch {
      return undefined; // a fresh host: nothing to keep
    }
  }
  const db = await openDatabase(url, { migrate: false, timeouts: options.config.settings.database });
  try {
    const tables = await db.query("SELECT 1 FROM schema_migrations LIMIT 1").catch(() => undefined);
    if (!tables) return undefined;
    return await createBackup({ db, config: options.config, trigger: 'pre-restore', toolVersion: options.toolVersion, context: options.context, directory, lockHeld: true });
  } finally {
    await db.close();
  }
}

/**
 * Renames the snapshot over the database. The old database's revocations are read, and
 * re-applied to the snapshot, before the rename: the file is at every moment the old data
 * or the restored data with those revocations, never the restored data without them.
 */
function hasSqliteTable(db: { prepare(sql: string): { get(...params: unknown[]): unknown } }, name: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
}

function hasSqliteColumn(db: { prepare(sql: string): { get(...params: unknown[]): unknown } }, table: string, column: string): boolean {
  return db.prepare('SELECT 1 FROM pragma_table_info(?) WHERE name = ?').get(table, column) !== undefined;
}

/** The tables and columns of the revocation carry that this SQLite database has (revocations.ts CarryTables). */
function carriedTables(db: { prepare(sql: string): { get(...params: unknown[]): unknown } }): CarryTables {
  const machines = hasSqliteTable(db, 'machines');
  const activationRequests = hasSqliteTable(db, 'activation_requests');
  return {
    machines,
    machineKeys: machines && hasSqliteColumn(db, 'machines', 'machine_key'),
    activationRequests,
    requestDigests: activationRequests && hasSqliteColumn(db, 'activation_requests', 'request_digest'),
  };
}

async function swapSqlite(database: string, snapshot: string, carry: RevocationCarry, keys: SigningKeyCarry, at: Date): Promise<void> {
  const { loadSqliteDriver } = await import('../storage/sqlite-driver.js');
  const Database = loadSqliteDriver();
  try {
    await stat(database);
    const old = new Database(database, { timeout: 5000 });
    try {
      const tables = old.prepare(`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name IN (${CARRIED_TABLES.map(() => '?').join(', ')})`).get(...CARRIED_TABLES) as { n: number };
      if (tables.n === CARRIED_TABLES.length) {
        await carry.read(sqliteQueryable(old), carriedTables(old));
      }
      if (hasSqliteTable(old, 'signing_keys')) await keys.read(sqliteQueryable(old), { current: hasSqliteColumn(old, 'signing_keys', 'retired_at') });
      // Fold the old WAL into the old file first: a WAL left beside the new file would be replayed into it.
      old.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      old.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const staged = new Database(snapshot);
  try {
    // A private key the carry deletes or replaces must not stay in the file's free space.
    staged.pragma('secure_delete = ON');
    staged.exec('BEGIN IMMEDIATE');
    try {
      await carry.apply(sqliteQueryable(staged), carriedTables(staged));
      await keys.apply(sqliteQueryable(staged), { current: hasSqliteColumn(staged, 'signing_keys', 'retired_at'), at });
      staged.exec('COMMIT');
    } catch (error) {
      staged.exec('ROLLBACK');
      throw error;
    }
  } finally {
    staged.close();
  }
  await chmod(snapshot, 0o600);
  await syncFile(snapshot);
  await rm(`${database}-wal`, { force: true });
  await rm(`${database}-shm`, { force: true });
  await rename(snapshot, database);
  await syncDirectory(path.dirname(database));
}

/** The Queryable interface over a bare better-sqlite3 handle (no shared connection, no WAL). */
function sqliteQueryable(db: import('better-sqlite3').Database): Queryable {
  const bind = (params: readonly SqlValue[] = []) => params.map((value) => (typeof value === 'boolean' ? (value ? 1 : 0) : value));
  return {
    query: async <R extends Row>(sql: string, params?: readonly SqlValue[]) => db.prepare(sql).all(...bind(params)) as R[],
    execute: async (sql: string, params?: readonly SqlValue[]) => db.prepare(sql).run(...bind(params)).changes,
  };
}

async function restoreConfigFile(config: ResolvedConfig, restored: string, at: Date): Promise<string> {
  const target = config.configFile ?? path.join(config.settings.dataDir, 'config.yaml');
  let current: string | undefined;
  try {
    current = await readFile(target, 'utf8');
  } catch {
    current = undefined;
  }
  const kept = `${target}.replaced-${at.toISOString().replace(/[-:.]/g, '')}`;
  if (current !== undefined) await writeFileDurably(kept, current, { mode: 0o600 });
  await writeFileDurably(target, await mergeRestoredConfig(await readFile(restored), current), { overwrite: true, mode: 0o600 });
  return current !== undefined ? kept : target;
}
