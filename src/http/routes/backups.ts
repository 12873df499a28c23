import type { RouteDependencies } from '../route-dependencies.js';
import { scopeAllows } from '../../lib/admin-tokens.js';
import { appendAudit } from '../../lib/audit.js';
import { LicenseServerError } from '../../lib/errors.js';
import { BACKUP_ID } from '../../lib/backup/archive/manifest.js';
import { backupView, pageBackups } from '../../lib/backup/view.js';
import { expectFields, expectQuery, PAGING_QUERY } from '../fields.js';
import { listReply } from '../list-reply.js';
import type { Route } from '../router.js';
import type { BackupTarget } from '../../lib/backup/targets/target.js';

/**
 * Backups through the admin API (docs/http-api.md, "Backups"). Long work answers when it is
 * done: a create, validate or restore request stays open until the work has finished.
 * A backup id that is not a well-formed id of a listed backup is a 404, never a path.
 */
export function backupRoutes(deps: RouteDependencies): Route[] {
  const directory = () => deps.settings.backup.path;
  const context = (actor: string) => ({ actor, clock: deps.clock });
  const knownId = (id: string) => {
    if (!BACKUP_ID.test(id)) throw new LicenseServerError('BACKUP_NOT_FOUND', 'no backup has this id');
    return id;
  };
  const selectTargetSettings = (name: string) => {
    const found = deps.settings.backup.targets.find((target) => target.name === name);
    if (!found) throw new LicenseServerError('TARGET_NOT_CONFIGURED', `no target is named ${JSON.stringify(name.slice(0, 40))}`);
    return found;
  };
  const withTarget = async <T>(name: string, work: (target: BackupTarget) => Promise<T>): Promise<T> => {
    const { openTarget } = await import('../../lib/backup/targets/open.js');
    const target = await openTarget(selectTargetSettings(name), deps.state.config.env);
    try {
      return await work(target);
    } finally {
      await target.close().catch(() => undefined);
    }
  };
  const expectName = (value: unknown, field: string): string => {
    if (typeof value !== 'string' || value === '') throw new LicenseServerError('INVALID_INPUT', `"${field}" must be a target's name`);
    return value;
  };
  return [
    {
      method: 'GET',
      path: '/api/backups',
      access: 'admin',
      scope: 'backups',
      handle: async (request) => {
        const q = expectQuery(request.query, [...PAGING_QUERY, 'target']);
        // Listed whole (the directory or the target's index), then paged: in memory already.
        if (q.target !== undefined) {
          // What the target itself holds: no scheduler or local debris here.
          const { listTargetBackups } = await import('../../lib/backup/targets/copy.js');
          const all = await withTarget(q.target, listTargetBackups);
          return listReply(request, 'backups', '/api/backups', async (page) => pageBackups(all, page), { envelope: (backups) => ({ backups, target: q.target }) });
        }
        const [{ listBackups }, { findDebris }] = await Promise.all([import('../../lib/backup/repository.js'), import('../../lib/backup/locks/debris.js')]);
        const all = await listBackups(directory());
        const scheduler = deps.scheduler ? await deps.scheduler.status() : { enabled: false, schedule: deps.settings.backup.schedule, next_run: null, last_run: null };
        const warnings = await findDebris({ directory: directory(), databaseUrl: deps.settings.database.url });
        return listReply(request, 'backups', '/api/backups', async (page) => pageBackups(all, page), { envelope: (backups) => ({ backups, scheduler, warnings }) });
      },
    },
    {
      method: 'POST',
      path: '/api/backups',
      access: 'admin',
      scope: 'backups',
      handle: async ({ body, actor }) => {
        expectFields(body, []);
        const { runBackup, unencryptedWarning } = await import('../backup-runner.js');
        const record = await runBackup(deps.state, deps.toolVersion, 'manual', context(actor));
        const warning = await unencryptedWarning(deps.state);
        if (warning) deps.log({ time: new Date().toISOString(), level: 'warn', msg: warning, backup_id: record.backup_id });
        const copies = deps.settings.backup.targets.length > 0 ? { copies: 'pending' } : {};
        return { status: 201, json: { ...backupView(record), ...copies, ...(warning ? { warning } : {}) } };
      },
    },
    {
      method: 'GET',
      path: '/api/backups/:backup_id/download',
      access: 'admin',
      scope: 'backups',
      handle: async ({ params, actor, scopes }) => {
        const { openArchive } = await import('../../lib/backup/repository.js');
        const id = knownId(params.backup_id!);
        const { handle, size, encrypted, record } = await openArchive(directory(), id);
        try {
          // An unencrypted archive is the whole database in the clear: the private signing key
          // (unless sealed), every license key and every license's decryption key. That is
          // `admin`'s to take; an encrypted one is useless without backup.encryption_key, which
          // never leaves this host's configuration.
          if (!encrypted && !scopes.includes('admin')) {
            throw new LicenseServerError(
              'BACKUP_UNENCRYPTED',
              `backup ${id} is not encrypted, so it holds the private signing key (unless sealed), every license key and every decryption key in the clear; only a token with the scope "admin" may download it`,
            );
          }
          // The archive holds the whole database and the signing key: no copy leaves untraced.
          await appendAudit(deps.db, context(actor), { action: 'backup.downloaded', entityType: 'backup', entityId: id, details: { file: record.file, size } });
        } catch (error) {
          await handle.close();
          throw error;
        }
        return {
          stream: handle.createReadStream({ start: 0, highWaterMark: 256 * 1024 }),
          size,
          contentType: 'application/octet-stream',
          headers: { 'Content-Disposition': `attachment; filename="${record.file}"` },
        };
      },
    },
    {
      method: 'POST',
      path: '/api/backups/:backup_id/validate',
      access: 'admin',
      scope: 'backups',
      handle: async ({ params, body, actor }) => {
        expectFields(body, [], ['target']);
        const id = knownId(params.backup_id!);
        if (body.target !== undefined) {
          const name = expectName(body.target, 'target');
          const { validateTargetCopy } = await import('../../lib/backup/targets/validate-copy.js');
          const { record, report } = await validateTargetCopy({ config: deps.state.config, target: name, id });
          await appendAudit(deps.db, context(actor), { action: 'backup.validated', entityType: 'backup', entityId: id, details: { valid: true, target: name, sha256: record.sha256 } });
          return { json: { valid: true, ...backupView(report), file: undefined, target: name } };
        }
        const { validateBackup } = await import('../../lib/backup/validate.js');
        const { isPostgresUrl } = await import('../../lib/storage/open.js');
        const url = deps.settings.database.url;
        const audit = (details: Record<string, unknown>) => appendAudit(deps.db, context(actor), { action: 'backup.validated', entityType: 'backup', entityId: id, details });
        let report;
        try {
          report = await validateBackup({ directory: directory(), reference: id, key: deps.settings.backup.encryptionKey, scratchDatabaseUrl: isPostgresUrl(url) ? url : undefined, databaseUrl: url });
        } catch (error) {
          if (error instanceof LicenseServerError && error.code !== 'BACKUP_NOT_FOUND') await audit({ valid: false, code: error.code });
          throw error;
        }
        await audit({ valid: true });
        return { json: { valid: true, ...backupView(report), file: undefined } };
      },
    },
    {
      method: 'POST',
      path: '/api/backups/:backup_id/restore',
      access: 'admin',
      scope: 'restore',
      handle: async ({ params, body, actor, scopes }) => {
        // A missing confirm is the same refusal as a wrong one: the guard was not given.
        expectFields(body, [], ['confirm', 'keep_revocations', 'force', 'dry_run', 'target', 'replace_keys']);
        const id = knownId(params.backup_id!);
        const expectBoolean = (flag: 'dry_run' | 'keep_revocations' | 'force' | 'replace_keys') => {
          if (body[flag] !== undefined && typeof body[flag] !== 'boolean') throw new LicenseServerError('INVALID_INPUT', `"${flag}" must be true or false`);
          return body[flag] as boolean | undefined;
        };
        // From a target: downloaded into a staging area under the backup directory, checked
        // against the target's index, and listed here only once restored.
        const target = body.target === undefined ? undefined : expectName(body.target, 'target');
        if (target !== undefined) selectTargetSettings(target);
        if (expectBoolean('dry_run') === true) {
          // A rehearsal of the restore's checks, changing nothing: no confirm needed.
          const { previewRestore } = await import('../../lib/backup/restore-preview.js');
          return { json: await previewRestore({ config: deps.state.config, reference: id, db: deps.state.db, ...(target === undefined ? {} : { target }) }) };
        }
        if (body.confirm !== id) {
          throw new LicenseServerError('RESTORE_NOT_CONFIRMED', 'the body must be {"confirm": "<the backup id>"}, naming the backup in the path');
        }
        const [keepRevocations, force, replaceKeys] = [expectBoolean('keep_revocations'), expectBoolean('force'), expectBoolean('replace_keys') === true];
        // Another server's keys and admin tokens replacing this server's hand the server to
        // whoever made the backup: that is admin's to allow, never a restore token's.
        if (replaceKeys && !scopeAllows(scopes, 'admin')) {
          throw new LicenseServerError('TOKEN_SCOPE', 'letting another server\'s backup replace this server\'s signing keys and admin tokens ("replace_keys") needs a token with the scope "admin"');
        }
        const { restoreWhileServing } = await import('../backup-runner.js');
        const report = await restoreWhileServing(deps, id, context(actor), {
          keepRevocations,
          force,
          replaceKeys,
          ...(target === undefined ? {} : { target }),
        });
        return { json: report };
      },
    },
    {
      // `backup restore --to-time T --target NAME` over the API: the replica as it was at T,
      // packed as an archive (with the configuration of the backup nearest T) and restored as one.
      method: 'POST',
      path: '/api/replicas/:target/restore',
      access: 'admin',
      scope: 'restore',
      handle: async ({ params, body, actor, scopes }) => {
        expectFields(body, ['to_time'], ['confirm', 'keep_revocations', 'force', 'dry_run', 'replace_keys']);
        const target = expectName(params.target!, 'target');
        if (typeof body.to_time !== 'string') throw new LicenseServerError('INVALID_INPUT', '"to_time" must be a timestamp such as 2026-11-29T14:03:00Z');
        const { parseTimestamp } = await import('../../lib/validate.js');
        const toTime = parseTimestamp(body.to_time, 'to_time');
        for (const flag of ['dry_run', 'keep_revocations', 'force', 'replace_keys'] as const) {
          if (body[flag] !== undefined && typeof body[flag] !== 'boolean') throw new LicenseServerError('INVALID_INPUT', `"${flag}" must be true or false`);
        }
        if (deps.db.engine === 'postgres') {
          throw new LicenseServerError('INVALID_INPUT', 'a point-in-time restore here restores a SQLite replica; a PostgreSQL store is restored to a time by pgBackRest, from its archived WAL (docs/replication.md, "PostgreSQL")');
        }
        const dryRun = body.dry_run === true;
        const replaceKeys = body.replace_keys === true;
        // Checked before the replica is read: a refusal costs nothing.
        if (!dryRun && body.confirm !== body.to_time) {
          throw new LicenseServerError('RESTORE_NOT_CONFIRMED', 'the body must repeat the moment as "confirm", exactly as "to_time" gives it');
        }
        if (replaceKeys && !scopeAllows(scopes, 'admin')) {
          throw new LicenseServerError('TOKEN_SCOPE', 'letting another server\'s state replace this server\'s signing keys and admin tokens ("replace_keys") needs a token with the scope "admin"');
        }
        const { replicaArchiveAt } = await import('../../lib/replication/point-in-time.js');
        const replica = await replicaArchiveAt({ config: deps.state.config, target, toTime, toolVersion: deps.toolVersion, context: context(actor), environment: deps.state.config.env });
        try {
          const about = { replica: replica.moment, configuration: replica.configuration };
          if (dryRun) {
            const { previewRestore } = await import('../../lib/backup/restore-preview.js');
            return { json: { ...(await previewRestore({ config: deps.state.config, reference: replica.archive, db: deps.state.db })), ...about } };
          }
          const { restoreWhileServing } = await import('../backup-runner.js');
          const report = await restoreWhileServing(deps, replica.archive, context(actor), { keepRevocations: body.keep_revocations as boolean | undefined, force: body.force as boolean | undefined, replaceKeys });
          return { json: { ...report, ...about } };
        } finally {
          await replica.dispose();
        }
      },
    },
    {
      method: 'GET',
      path: '/api/backups/status',
      access: 'admin',
      scope: 'backups',
      handle: async ({ query }) => {
        const q = expectQuery(query, ['max_age', 'place']);
        const [{ backupStatus }, { parseDuration }] = await Promise.all([import('../../lib/backup/status.js'), import('../../lib/duration.js')]);
        const maxAgeMs = q.max_age === undefined ? undefined : parseDuration(q.max_age, 'max_age');
        const places = q.place === undefined ? undefined : [q.place];
        if (places && places[0] !== 'local') selectTargetSettings(places[0]!);
        const status = await backupStatus({ config: deps.state.config, db: deps.db, at: deps.clock ? deps.clock() : new Date(), ...(maxAgeMs === undefined ? {} : { maxAgeMs }), ...(places ? { places } : {}) });
        const [drill] = await (await import('../../lib/backup/drill-history.js')).readDrillHistory(deps.settings.backup.path);
        const walArchiving = deps.db.engine === 'postgres' ? await (await import('../../lib/backup/wal-archiving.js')).readWalArchiving(deps.db) : null;
        return { json: { places: status, stale: status.some((place) => place.stale === true), replication: deps.state.replicator?.status() ?? null, wal_archiving: walArchiving, drill: drill ?? null } };
      },
    },
    {
      method: 'POST',
      path: '/api/backups/:backup_id/copy',
      access: 'admin',
      scope: 'backups',
      handle: async ({ params, body, actor }) => {
        expectFields(body, [], ['to']);
        const id = knownId(params.backup_id!);
        if (body.to !== undefined && (!Array.isArray(body.to) || body.to.length === 0 || !body.to.every((name: unknown) => typeof name === 'string'))) {
          throw new LicenseServerError('INVALID_INPUT', '"to" must be a non-empty list of target names');
        }
        const only = body.to as string[] | undefined;
        const settings = only ? only.map(selectTargetSettings) : deps.settings.backup.targets;
        if (settings.length === 0) throw new LicenseServerError('TARGET_NOT_CONFIGURED', 'no off-site target is configured (backup.targets)');
        const [{ copyToTargets }, { resolveBackup }] = await Promise.all([import('../../lib/backup/targets/replicate.js'), import('../../lib/backup/repository.js')]);
        const { record } = await resolveBackup(directory(), id);
        const copies = await copyToTargets({ db: deps.db, config: deps.state.config, directory: directory(), record: record!, context: context(actor), ...(only ? { only } : {}) });
        return { json: { id, copies, failed: copies.filter((copy) => copy.result === 'failed' || copy.result === 'refused-unencrypted').length } };
      },
    },
  ];
}
