import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { recordAudit } from '../../audit.js';
import { now, type OperationContext } from '../../context.js';
import { syncDirectory } from '../../files/durable-write.js';
import { isPostgresUrl } from '../../storage/open.js';
import type { Database } from '../../storage/types.js';
import { asJson } from '../../storage/values.js';
import { backupLockHolderAlive } from './lock.js';
import { archiveName, recordFrom, removePruned, unlistedFiles, writeIndex } from '../repository.js';
import { ownerOfWork, ownerState } from './work-owner.js';

/**
 * What killed processes leave in a backup directory and on a PostgreSQL server, found and
 * cleared (docs/backup-format.md, "Interrupted work"):
 * - an archive without an index: a create killed between its rename and its index. The
 *   archive was fsynced before the rename, so it is adopted when it verifies whole (listed,
 *   with its `backup.created` audit entry if it had none) and removed when it is damaged;
 * - a `<id>.backup.pruned` mark: a prune killed after unlisting; its archive is removed and
 *   its `backup.pruned` audit entry written if it had none;
 * - `.validate-*` and `.restore-*` directories and `license_validate_*` scratch databases
 *   whose maker is gone (work-owner.ts);
 * - `.tmp-*` and `*.partial`: removed by the lock holder itself (lock.ts).
 * Not debris but named with it: an index or archive name that is not a regular file (a
 * symbolic link, a FIFO), which is never read and never cleared: someone put it there.
 */
export type DebrisKind = 'unlisted-archive' | 'pruned-archive' | 'unfinished-prune' | 'backup-work' | 'validate-work' | 'restore-work' | 'scratch-database' | 'not-a-regular-file';

export interface DebrisItem {
  readonly kind: DebrisKind;
  /** A file or directory name in its directory, or a database name. */
  readonly name: string;
  /** One stable line for an operator (documented). */
  readonly message: string;
}

export interface DebrisScope {
  readonly directory: string;
  /** database.url: where a SQLite restore stages (beside the file), or the server holding scratch databases. */
  readonly databaseUrl?: string;
}

/** What the caller may do beyond removing dead processes' work: only a backup lock holder adopts and audits. */
export interface LockedRecovery {
  /** Without one, nothing that needs an audit entry is done. */
  readonly db?: Database;
  readonly context: OperationContext;
  readonly key?: Buffer;
}

export interface ClearedDebris {
  readonly adopted: string[];
  readonly removed: string[];
  readonly droppedDatabases: string[];
}

const WORK = /^\.(validate|restore)-/;

/** Finds debris and changes nothing: for `backup list`. */
export async function findDebris(scope: DebrisScope): Promise<DebrisItem[]> {
  const directory = path.resolve(scope.directory);
  const { archives, prunedMarks, names, irregular } = await unlistedFiles(directory);
  const items: DebrisItem[] = [];
  for (const { name, kind } of irregular) {
    items.push({ kind: 'not-a-regular-file', name, message: `${name} is ${kind}, not a regular file: it is never listed, downloaded, validated or restored; remove it, or put the file itself there` });
  }
  // A live create, prune or restore is mid-way through what would look like debris.
  const busy = await backupLockHolderAlive(directory);
  for (const name of busy ? [] : archives) {
    const id = name.replace(/\.backup\.tar\.gz(\.enc)?$/, '');
    if (prunedMarks.includes(id)) {
      items.push({ kind: 'pruned-archive', name, message: `pruned archive ${name}: an interrupted prune unlisted it; the next backup create, prune or validate removes it` });
    } else {
      items.push({ kind: 'unlisted-archive', name, message: `unlisted archive ${name}: no index (an interrupted backup create); the next backup create or prune lists it if it verifies, or removes it if damaged` });
    }
  }
  const archived = new Set(archives.map((name) => name.replace(/\.backup\.tar\.gz(\.enc)?$/, '')));
  for (const id of busy ? [] : prunedMarks.filter((mark) => !archived.has(mark))) {
    items.push({ kind: 'unfinished-prune', name: `${id}.backup.pruned`, message: `unfinished prune of backup ${id}: the next backup create or prune finishes it and records its audit entry` });
  }
  if (!busy) {
    for (const name of names.filter((n) => n.startsWith('.tmp-') || n.endsWith('.partial'))) {
      items.push({ kind: 'backup-work', name, message: `leftover ${name} of an interrupted backup: the next backup create, prune or restore removes it` });
    }
  }
  for (const parent of workParents(directory, scope.databaseUrl)) {
    for (const name of await workNames(parent)) {
      const kind = name.startsWith('.validate-') ? 'validate-work' : 'restore-work';
      const command = kind === 'validate-work' ? 'validate' : 'restore';
      const shown = path.join(parent, name);
      const owner = ownerOfWork(name);
      if (!owner) {
        items.push({ kind, name: shown, message: `leftover ${shown} of a backup ${command} by an older release: remove it by hand when no backup ${command} is running` });
        continue;
      }
      const state = ownerState(owner);
      if (state === 'gone') items.push({ kind, name: shown, message: `leftover ${shown} of a backup ${command} that is gone (process ${owner.pid}): the next backup create, prune or validate removes it` });
    }
  }
  if (scope.databaseUrl && isPostgresUrl(scope.databaseUrl)) {
    const { deadScratchDatabases } = await import('../engines/scratch-databases.js');
    for (const name of await deadScratchDatabases(scope.databaseUrl)) {
      items.push({ kind: 'scratch-database', name, message: `scratch database ${name} of a backup validate that is gone: the next backup create, prune or validate drops it` });
    }
  }
  return items;
}

/**
 * Clears what dead processes left. Anyone may remove dead makers' work and finish a prune's
 * file deletions; `locked` (the caller holds the backup lock, so no create or prune is half
 * way in this directory) also adopts or removes unlisted archives and writes missing audit
 * entries. Best effort: what cannot be cleared now stays, and `backup list` names it.
 */
export async function clearDebris(scope: DebrisScope & { locked?: LockedRecovery }): Promise<ClearedDebris> {
  const directory = path.resolve(scope.directory);
  const cleared: ClearedDebris = { adopted: [], removed: [], droppedDatabases: [] };
  const { archives, prunedMarks } = await unlistedFiles(directory).catch(() => ({ archives: [] as string[], prunedMarks: [] as string[] }));
  for (const id of prunedMarks) {
    // Idempotent, so safe beside a live prune; the mark stays until the audit entry is sure.
    for (const encrypted of [false, true]) await rm(path.join(directory, archiveName(id, encrypted)), { force: true }).catch(() => undefined);
  }
  if (scope.locked?.db && prunedMarks.length > 0) {
    await finishPrunes(directory, prunedMarks, scope.locked.db, scope.locked.context).catch(() => undefined);
  }
  const db = scope.locked?.db;
  if (scope.locked && db) {
    for (const name of archives.filter((file) => !prunedMarks.includes(file.replace(/\.backup\.tar\.gz(\.enc)?$/, '')))) {
      const outcome = await adoptOrRemove(directory, name, { ...scope.locked, db }).catch(() => 'left' as const);
      if (outcome === 'adopted') cleared.adopted.push(name);
      if (outcome === 'removed') cleared.removed.push(name);
    }
  }
  for (const parent of workParents(directory, scope.databaseUrl)) {
    for (const name of await workNames(parent)) {
      const owner = ownerOfWork(name);
      if (!owner || ownerState(owner) !== 'gone') continue;
      await rm(path.join(parent, name), { recursive: true, force: true }).then(() => cleared.removed.push(name), () => undefined);
    }
  }
  if (scope.databaseUrl && isPostgresUrl(scope.databaseUrl)) {
    const { dropDeadScratchDatabases } = await import('../engines/scratch-databases.js');
    cleared.droppedDatabases.push(...(await dropDeadScratchDatabases(scope.databaseUrl)));
  }
  return cleared;
}

/**
 * Verifies an interrupted create's archive whole. Whole: its audit entry (if the kill came
 * before it) and then its index, in the order a create writes them. Damaged: removed, as the
 * create would have removed it. Anything else (no key, another key, an unreadable file)
 * leaves it for the operator.
 */
async function adoptOrRemove(directory: string, name: string, locked: LockedRecovery & { db: Database }): Promise<'adopted' | 'removed' | 'left'> {
  const file = path.join(directory, name);
  const { verifyArchive } = await import('../archive/verify.js');
  let verified;
  try {
    verified = await verifyArchive(file, { key: locked.key, hashFile: true });
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code !== 'BACKUP_CORRUPT' && code !== 'BACKUP_INVALID') return 'left';
    await rm(file, { force: true });
    await syncDirectory(directory);
    return 'removed';
  }
  const { manifest, encrypted, digest } = verified;
  // A file renamed by hand is not ours to list under another id.
  if (archiveName(manifest.backup_id, encrypted) !== name) return 'left';
  const record = recordFrom(manifest, { name, size: digest.size, sha256: digest.sha256 }, encrypted, now(locked.context));
  await locked.db.transaction(async (tx) => {
    const audited = await tx.query("SELECT 1 AS one FROM audit_log WHERE entity_type = 'backup' AND entity_id = ? AND action = 'backup.created'", [record.backup_id]);
    if (audited.length > 0) return;
    await recordAudit(tx, locked.context, {
      action: 'backup.created',
      entityType: 'backup',
      entityId: record.backup_id,
      details: { trigger: record.trigger, size: record.size, encrypted: record.encrypted, file: record.file, recovered: true },
    });
  });
  await writeIndex(directory, record);
  return 'adopted';
}

/** The audit entry of an interrupted prune (unless it was written before the kill), then its marks. */
async function finishPrunes(directory: string, ids: readonly string[], db: Database, context: OperationContext): Promise<void> {
  await db.transaction(async (tx) => {
    const rows = await tx.query<{ details: unknown }>("SELECT details FROM audit_log WHERE entity_type = 'backup' AND action = 'backup.pruned'");
    const audited = new Set(rows.flatMap((row) => {
      const removed = asJson(row.details).removed;
      return Array.isArray(removed) ? removed.map(String) : [];
    }));
    const missing = ids.filter((id) => !audited.has(id));
    if (missing.length === 0) return;
    await recordAudit(tx, context, { action: 'backup.pruned', entityType: 'backup', details: { removed: missing, recovered: true } });
  });
  for (const id of ids) await removePruned(directory, id);
  await syncDirectory(directory);
}

/** The backup directory, and for SQLite the database's directory, where a restore stages. */
function workParents(directory: string, databaseUrl: string | undefined): string[] {
  const parents = [directory];
  if (databaseUrl && !isPostgresUrl(databaseUrl)) {
    const beside = path.dirname(path.resolve(databaseUrl));
    if (beside !== directory) parents.push(beside);
  }
  return parents;
}

async function workNames(parent: string): Promise<string[]> {
  return (await readdir(parent).catch(() => [] as string[])).filter((name) => WORK.test(name)).sort();
}
