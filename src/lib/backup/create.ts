import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { recordAudit } from '../audit.js';
import type { ResolvedConfig } from '../config/resolve.js';
import { displayEntries } from '../config/resolve.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { syncDirectory, syncFile } from '../files/durable-write.js';
import { asWriteFailure, describeFsError } from '../fs-errors.js';
import { raiseEvent } from '../notifications/outbox.js';
import { currentVersion } from '../storage/migrations.js';
import type { Database } from '../storage/types.js';
import { digestFile, type ArchiveEntry, type EntryName, type FileDigest, type Progress } from './archive/archive.js';
import { clearDebris } from './locks/debris.js';
import { inWorker } from './in-worker.js';
import { acquireBackupLock } from './locks/lock.js';
import { BACKUP_FORMAT, BACKUP_FORMAT_VERSION, type Manifest, type Trigger } from './archive/manifest.js';
import { archiveName, recordFrom, writeIndex, type BackupRecord } from './repository.js';
import { exportNotifications, sanitizedConfigFile } from './settings-export.js';
import type { KeySummary } from './signing-key-carry.js';
import { snapshotSqlite } from './engines/sqlite-snapshot.js';

export interface CreateBackupOptions {
  readonly db: Database;
  readonly config: ResolvedConfig;
  readonly trigger: Trigger;
  readonly toolVersion: string;
  readonly context: OperationContext;
  /** Overrides backup.path. */
  readonly directory?: string;
  /** Set by a restore that already holds the lock for its pre-restore backup. */
  readonly lockHeld?: boolean;
  /** Phases and bytes, for a progress display. */
  readonly onPhase?: (phase: 'snapshot' | 'pack' | 'verify', totalBytes?: number) => void;
  readonly onProgress?: Progress;
}

/**
 * What a backup made without backup.encryption_key is told, wherever it is made (CLI, API,
 * admin page): anyone holding the file reads the data, and signs with an unsealed key in it.
 */
export async function unencryptedBackupWarning(db: Database): Promise<string> {
  const { unsealedPrivateKeys } = await import('../signing-keys/keys.js');
  const unsealed = await unsealedPrivateKeys(db).catch(() => 0);
  return unsealed > 0
    ? `backup.encryption_key is not set: this backup is not encrypted and holds ${unsealed === 1 ? 'an unsealed private signing key' : `${unsealed} unsealed private signing keys`}; anyone who holds the file can sign licenses. Set backup.encryption_key, or seal the keys (signing.key_encryption_key, then \`signing-key protect\`).`
    : 'backup.encryption_key is not set: this backup is not encrypted, and anyone who holds the file can read licenses and customers (the private signing keys in it are sealed).';
}

/** `20261122T101500123Z-3f9a1c`: the creation time to the millisecond, then 24 random bits. */
export function newBackupId(at: Date): string {
  return `${at.toISOString().replace(/[-:.]/g, '')}-${randomBytes(3).toString('hex')}`;
}

/**
 * Makes one backup (spec 1, 2.8): a consistent database snapshot, the configuration
 * (secrets removed) and the notification settings, packed, compressed, encrypted when a
 * key is set; written as .partial, fsynced, renamed, the directory fsynced; then read back
 * whole, every chunk and checksum checked, and only then listed (its index written) and
 * audited. Anything that fails leaves no listed backup and no partial file.
 */
export async function createBackup(options: CreateBackupOptions): Promise<BackupRecord> {
  try {
    return await createVerifiedBackup(options);
  } catch (error) {
    // Another backup running is not a failure worth an alert.
    const busy = error instanceof LicenseServerError && error.code === 'BACKUP_IN_PROGRESS';
    if (options.trigger !== 'pre-restore' && !busy) await raiseBackupFailed(options, error);
    throw error;
  }
}

/**
 * backup.failed, as an event and an audit entry (details: trigger, code), in a transaction of
 * its own: a failed backup changed nothing to report it with. The entry is what the metrics
 * read as the last failure per trigger (metrics/store-figures.ts). Best effort: a database
 * that is down cannot take it, and the backup's own error is what the caller must see.
 */
async function raiseBackupFailed(options: CreateBackupOptions, error: unknown): Promise<void> {
  const message = error instanceof Error ? error.message : String(error);
  const code = error instanceof LicenseServerError ? error.code : 'INTERNAL';
  await options.db
    .transaction(async (tx) => {
      await recordAudit(tx, options.context, { action: 'backup.failed', entityType: 'backup', details: { trigger: options.trigger, code } });
      await raiseEvent(tx, 'backup.failed', { trigger: options.trigger, error: message, actor: options.context.actor }, options.context);
    })
    .catch(() => undefined);
}

async function createVerifiedBackup(options: CreateBackupOptions): Promise<BackupRecord> {
  const { db, config, context } = options;
  const directory = path.resolve(options.directory ?? config.settings.backup.path);
  const key = config.settings.backup.encryptionKey;
  if (options.directory !== undefined) {
    // A directory named for this one backup (--path) is often a mount point: when the disk is
    // not mounted, creating the path would fill this host's own disk instead.
    const found = await stat(directory).catch((error: unknown) => error as NodeJS.ErrnoException);
    if (found instanceof Error || !found.isDirectory()) {
      const why = !(found instanceof Error) ? 'is not a directory' : found.code === 'ENOENT' ? 'does not exist' : `cannot be used: ${describeFsError(found)}`;
      throw new LicenseServerError('FILE_WRITE_FAILED', `the backup directory ${directory} ${why}; a directory given with --path is never created (an unmounted disk would fill this host's instead)`);
    }
  }
  try {
    await mkdir(directory, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new LicenseServerError('FILE_WRITE_FAILED', `cannot create the backup directory ${directory}: ${describeFsError(error)}`);
  }
  const release = options.lockHeld ? async () => undefined : await acquireBackupLock(directory, 'create', now(context), config.settings.database.url);
  if (!options.lockHeld) {
    // Before the new archive takes room: what killed runs left may be large.
    await clearDebris({ directory, databaseUrl: config.settings.database.url, locked: { db, context, key } }).catch(() => undefined);
  }
  const started = now(context);
  const id = newBackupId(started);
  const writeFailed = `cannot write the backup into ${directory}`;
  let work: string;
  try {
    work = await mkdtemp(path.join(directory, `.tmp-${id}-`));
  } catch (error) {
    await release();
    throw asWriteFailure(error, writeFailed);
  }
  const finalName = archiveName(id, key !== undefined);
  const partial = path.join(directory, `${finalName}.partial`);
  try {
    options.onPhase?.('snapshot');
    const signingKeys = await keySummaries(db);
    const entries: ArchiveEntry[] = [];
    // The PostgreSQL dump's digest is computed as it is written; the rest are read once more here.
    const digests = new Map<EntryName, FileDigest>();
    const addFile = async (name: EntryName, file: string) => entries.push({ name, path: file, size: (await stat(file)).size });
    const addData = (name: EntryName, data: Buffer) => entries.push({ name, data, size: data.length });
    if (db.engine === 'sqlite') {
      const snapshot = path.join(work, 'sqlite.db');
      await snapshotSqlite(db.location, snapshot);
      await addFile('database/sqlite.db', snapshot);
    } else {
      const dump = await inWorker('dumpPostgres', [config.settings.database.url, work]);
      entries.push({ name: 'database/postgres.sql', compressed: { path: dump.compressed, members: dump.members }, size: dump.size });
      digests.set('database/postgres.sql', { size: dump.size, sha256: dump.sha256 });
    }
    if (config.configFile) addData('config/config.yaml', await sanitizedConfigFile(config.configFile));
    const nonSecret = displayEntries(config).filter((_, i) => !config.entries[i]!.secret);
    addData('config/effective.json', Buffer.from(`${JSON.stringify(nonSecret, null, 2)}\n`));
    addData('notifications.json', await exportNotifications(db));

    const listed = [];
    for (const entry of entries) {
      const digest = digests.get(entry.name) ?? (entry.data ? digestOfBuffer(entry.data) : await digestFile(entry.path!));
      listed.push({ name: entry.name, ...digest });
    }
    const manifest: Manifest = {
      format: BACKUP_FORMAT,
      format_version: BACKUP_FORMAT_VERSION,
      backup_id: id,
      created_at: started.toISOString(),
      tool_version: options.toolVersion,
      engine: db.engine,
      schema_version: await currentVersion(db),
      trigger: options.trigger,
      entries: listed,
      ...(signingKeys ? { signing_keys: signingKeys } : {}),
    };
    const manifestBytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`, 'utf8');
    const all: ArchiveEntry[] = [{ name: 'manifest.json', data: manifestBytes, size: manifestBytes.length }, ...entries];

    options.onPhase?.('pack', entries.reduce((sum, entry) => sum + entry.size, 0));
    let written;
    try {
      written = await inWorker('writeArchive', [partial, all, key], options.onProgress);
      await syncFile(partial);
      await rename(partial, path.join(directory, finalName));
      await syncDirectory(directory);
    } catch (error) {
      if (error instanceof LicenseServerError) throw error;
      throw new LicenseServerError('FILE_WRITE_FAILED', `${writeFailed}: ${describeFsError(error)}`);
    }

    options.onPhase?.('verify', written.size);
    const archive = path.join(directory, finalName);
    try {
      // The whole file is hashed in the same read as the checks.
      const reread = await inWorker('verifyWritten', [archive, key, written.members], options.onProgress);
      if (reread.size !== written.size || reread.sha256 !== written.sha256) {
        throw new LicenseServerError('BACKUP_CORRUPT', 'backup is damaged: the file read back differs from what was written');
      }
    } catch (error) {
      await rm(archive, { force: true });
      throw error;
    }
    const record = recordFrom(manifest, { name: finalName, size: written.size, sha256: written.sha256 }, key !== undefined, now(context));
    // The audit entry before the index: a kill between them leaves an unlisted archive whose
    // entry exists, which the next lock holder lists without a second entry (debris.ts); the
    // other order would leave a listed backup with no entry.
    try {
      await db.transaction(async (tx) => {
        await recordAudit(tx, context, {
          action: 'backup.created',
          entityType: 'backup',
          entityId: id,
          details: { trigger: record.trigger, size: record.size, encrypted: record.encrypted, file: record.file },
        });
        if (options.trigger !== 'pre-restore') {
          await raiseEvent(tx, 'backup.succeeded', { backup_id: id, trigger: record.trigger, size: record.size, encrypted: record.encrypted, actor: context.actor }, context);
        }
      });
    } catch (error) {
      await rm(archive, { force: true });
      throw error;
    }
    // An index that cannot be written (the disk filled just now) leaves the verified archive
    // with its audit entry: the next create or prune lists it (debris.ts) rather than the log
    // naming a backup that was deleted.
    await writeIndex(directory, record);
    return record;
  } catch (error) {
    // The snapshot or dump ran out of room (packing, above, says so itself).
    throw asWriteFailure(error, writeFailed);
  } finally {
    await rm(partial, { force: true }).catch(() => undefined);
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
    await release();
  }
}

/** The keys for the manifest; undefined for a schema before 5 (a pre-restore backup of an unmigrated store). */
async function keySummaries(db: Database): Promise<KeySummary[] | undefined> {
  const { listSigningKeys } = await import('../signing-keys/keys.js');
  try {
    return (await listSigningKeys(db)).map(({ key_id, state, created_at }) => ({ key_id, state, created_at }));
  } catch {
    return undefined;
  }
}

function digestOfBuffer(data: Buffer): FileDigest {
  return { size: data.length, sha256: createHash('sha256').update(data).digest('hex') };
}
