import { appendAudit } from '../lib/audit.js';
import type { OperationContext } from '../lib/context.js';
import { LicenseServerError } from '../lib/errors.js';
import type { BackupRecord } from '../lib/backup/repository.js';
import type { Trigger } from '../lib/backup/archive/manifest.js';
import type { RestoreReport } from '../lib/backup/restore.js';
import type { RestoreSource } from '../lib/backup/restore-source.js';
import type { RouteDependencies } from './route-dependencies.js';
import type { ServingState } from './serving-state.js';

/**
 * One backup by the daemon (API or schedule), then retention, as `backup create` does; its
 * off-site copies are noted and made by the copier, off the request (a copy of gigabytes must
 * not hold an API call open). A failure to note them is logged by the copier's catch-up.
 */
export async function runBackup(state: ServingState, toolVersion: string, trigger: Trigger, context: OperationContext): Promise<BackupRecord> {
  const { createBackup } = await import('../lib/backup/create.js');
  const { pruneBackups } = await import('../lib/backup/retention.js');
  const { config, db } = state;
  const record = await createBackup({ db, config, trigger, toolVersion, context });
  await pruneBackups({ directory: config.settings.backup.path, policy: config.settings.backup, context, db, databaseUrl: config.settings.database.url, key: config.settings.backup.encryptionKey });
  await state.copier?.noteBackup(record.backup_id).catch(() => undefined);
  return record;
}

/** The warning of a backup made without backup.encryption_key (create.ts), for the API's answer and log. */
export async function unencryptedWarning(state: ServingState): Promise<string | undefined> {
  if (state.config.settings.backup.encryptionKey) return undefined;
  const { unencryptedBackupWarning } = await import('../lib/backup/create.js');
  return unencryptedBackupWarning(state.db);
}

/**
 * A restore while serving: new requests get 503 with Retry-After, requests in flight finish,
 * the pre-restore backup is taken, the database is closed and swapped, the configuration and
 * signing key are loaded again, and serving resumes. No request sees a mix of old and new
 * data; when anything fails, the old database is opened again and keeps serving. A backup on a
 * target is downloaded (into a staging area) before the daemon pauses, so that it serves on
 * meanwhile, and an archive the target may not hand back unencrypted is refused before then.
 */
export async function restoreWhileServing(
  deps: RouteDependencies,
  reference: string,
  context: OperationContext,
  options: { keepRevocations?: boolean | undefined; force?: boolean | undefined; replaceKeys?: boolean; target?: string } = {},
): Promise<RestoreReport> {
  const [{ restoreBackup }, { openRestoreSource }] = await Promise.all([import('../lib/backup/restore.js'), import('../lib/backup/restore-source.js')]);
  const { config } = deps.state;
  let source: RestoreSource | undefined;
  let paused = false;
  let closed = false;
  try {
    if (options.target !== undefined) source = await openRestoreSource({ config, reference, directory: config.settings.backup.path, target: options.target });
    // This request stays in flight; every other one is waited for.
    await deps.maintenance.begin(30, 1, 10_000);
    paused = true;
    const report = await restoreBackup({
      config,
      reference,
      ...(source ? { source } : {}),
      toolVersion: deps.toolVersion,
      context,
      inDaemon: true,
      daemonLock: deps.state.daemonLock,
      keepRevocations: options.keepRevocations,
      force: options.force,
      replaceKeys: options.replaceKeys === true,
      beforeSwap: async () => {
        closed = true;
        // Litestream must not copy the file while it is swapped, nor carry on with the old generation.
        await deps.state.replicator?.pause();
        await deps.state.closeDatabase();
      },
    });
    await deps.state.reopen(true);
    await deps.state.replicator?.resume();
    // A backup of a store from before `init` may hold no signing key; the daemon makes one,
    // as it does at start, rather than refuse every checkout until it is restarted.
    const { ensureSigningKey } = await import('../lib/signing-keys/keys.js');
    await ensureSigningKey(deps.state.db, context);
    await (await import('../lib/signing-keys/endorsements.js')).endorseKeys(deps.state.db, context);
    deps.log({ time: new Date().toISOString(), level: 'info', msg: 'backup restored', backup_id: report.backup_id, pre_restore_backup_id: report.pre_restore_backup_id });
    if (report.pre_restore_backup_id) await deps.state.copier?.noteBackup(report.pre_restore_backup_id).catch(() => undefined);
    return report;
  } catch (error) {
    if (closed) {
      await deps.state.reopen(false);
      await deps.state.replicator?.resume();
    }
    // The restore wrote its own entry on success; a refused or failed one leaves this trace.
    const code = error instanceof LicenseServerError ? error.code : 'INTERNAL';
    await appendAudit(deps.state.db, context, { action: 'backup.restore_failed', entityType: 'backup', entityId: reference, details: { code, ...(options.target === undefined ? {} : { target: options.target }) } }).catch((auditError: unknown) =>
      deps.log({ time: new Date().toISOString(), level: 'error', msg: 'cannot audit a failed restore', backup_id: reference, error: auditError instanceof Error ? auditError.message.slice(0, 200) : String(auditError) }),
    );
    throw error;
  } finally {
    await source?.dispose();
    if (paused) deps.maintenance.end();
  }
}
