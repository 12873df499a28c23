import { readFileSync } from 'node:fs';
import { BaseCommand } from '../cli/base-command.js';
import { serverFlags } from '../cli/flags.js';
import { LicenseServerError } from '../lib/errors.js';
import { describeFsError } from '../lib/fs-errors.js';

export default class Serve extends BaseCommand<typeof Serve> {
  static override description = `Run the HTTP daemon: the admin API, online validation, grace tokens and usage reports.
On first start it creates the signing key and, when no admin token exists, a bootstrap admin token that it prints once; the token is made only once the daemon listens, so a start that fails with LISTEN_FAILED leaves none, and the next start prints it. SIGTERM or SIGINT stops it gracefully: no new requests, those in flight finish (up to 8 s), the database is closed, exit 0.`;
  static override enableJsonFlag = false;
  static override flags = { ...serverFlags };

  /** The automatic backups of backup.enabled, on backup.schedule. */
  private async scheduler(state: ServingStateType, log: (entry: Record<string, unknown>) => void) {
    const [{ BackupScheduler }, { runBackup }, { listBackups }] = await Promise.all([
      import('../lib/backup/scheduler.js'),
      import('../http/backup-runner.js'),
      import('../lib/backup/repository.js'),
    ]);
    return new BackupScheduler({
      expression: state.config.settings.backup.schedule,
      database: () => state.db,
      run: () => runBackup(state, this.config.version, 'scheduled', { actor: 'scheduler' }),
      newestBackup: async () => {
        const [newest] = await listBackups(state.config.settings.backup.path);
        return newest ? new Date(newest.created_at) : undefined;
      },
      clock: {
        now: () => new Date(),
        setTimeout: (callback, ms) => setTimeout(callback, ms),
        clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
      },
      log,
    });
  }

  /** Restore drills on backup.drill.schedule: recorded beside the backups, a failure raised as backup.drill_failed (drill.ts). */
  private async drills(state: ServingStateType, log: (entry: Record<string, unknown>) => void) {
    const { DrillSchedule } = await import('../lib/backup/drill-schedule.js');
    return new DrillSchedule({
      expression: state.config.settings.backup.drill.schedule,
      clock: { now: () => new Date(), setTimeout: (callback, ms) => setTimeout(callback, ms), clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout) },
      log,
      run: async () => {
        const { runDrill } = await import('../lib/backup/drill.js');
        try {
          // The counts scan tables: on the figures' reader (a thread of its own at nice 19 on SQLite), not the connection answering clients.
          const record = await runDrill({ config: state.config, live: state.figureReads, events: state.db, trigger: 'scheduled', context: { actor: 'scheduler' }, environment: process.env });
          log({
            level: record.ok ? 'info' : 'error',
            msg: record.ok ? 'restore drill passed' : 'restore drill failed',
            parts: record.parts.map((part) => ({ source: part.source, name: part.name, ok: part.ok, seconds: part.seconds, ...(part.error ? { error: part.error.message } : {}) })),
          });
        } catch (error) {
          if (!(error instanceof LicenseServerError && error.code === 'BACKUP_NOT_FOUND')) throw error;
          log({ level: 'info', msg: 'restore drill skipped', reason: error.message });
        }
      },
    });
  }

  async run(): Promise<void> {
    const config = await this.resolveConfig();
    const { settings } = config;
    const tls = settings.server.tlsCert && settings.server.tlsKey
      ? { cert: readPem(settings.server.tlsCert), key: readPem(settings.server.tlsKey) }
      : undefined;
    const [{ openDatabase }, { ensureSigningKey }, { getSigner }, { bootstrapAdminToken }, { createApp }, { listen }] = await Promise.all([
      import('../lib/storage/open.js'),
      import('../lib/signing-keys/keys.js'),
      import('../lib/signing-keys/signer.js'),
      import('../lib/admin-tokens.js'),
      import('../http/app.js'),
      import('../http/server.js'),
    ]);
    const { createLogWriter } = await import('../http/log-writer.js');
    // Before the database is opened: storage reports to it (lib/storage/observer.ts).
    const metrics = new (await import('../http/metrics.js')).DaemonMetrics({ processMetrics: true });
    const log = createLogWriter();
    const { ServingState } = await import('../http/serving-state.js');
    let state: InstanceType<typeof ServingState> | undefined;
    const { DAEMON_APPLICATION_NAME, holdDaemonLock } = await import('../lib/backup/locks/daemon-lock.js');
    const { LockFence } = await import('../http/lock-fence.js');
    const fence = new LockFence(log, () => state);
    // Taken before the database is opened: a SQLite file opened before a running restore's
    // swap would be the replaced one, and a PostgreSQL schema must not be migrated under it.
    const daemonLock = await holdDaemonLock(settings.database.url, {
      waitSeconds: settings.server.restoreWait,
      timeouts: settings.database,
      onWaiting: (holder) => log({ level: 'warn', msg: 'a restore of the database is running; waiting for it to finish before serving', holder, wait_s: settings.server.restoreWait }),
      onLost: (reason) => fence.lost(reason),
      onRegained: () => fence.regained(),
    });
    // Which key-encryption key this daemon holds, for `signing-key protect` to see (daemon-keks.ts).
    const { announceDaemonKek } = await import('../lib/signing-keys/daemon-keks.js');
    const kek = settings.signing.keyEncryptionKey;
    let announcement: Awaited<ReturnType<typeof announceDaemonKek>> | undefined;
    let db: Awaited<ReturnType<typeof openDatabase>>;
    const replicating = settings.backup.replication !== undefined;
    try {
      announcement = await announceDaemonKek(settings.database.url, kek ? (await import('../lib/signing-keys/protection.js')).kekIdOf(kek) : null);
      db = await openDatabase(settings.database.url, { applicationName: DAEMON_APPLICATION_NAME, serving: true, checkpointsByLitestream: replicating, keyEncryptionKey: kek, timeouts: settings.database, observer: metrics.storage });
    } catch (error) {
      await announcement?.release();
      await daemonLock.release();
      throw error;
    }
    const context = { actor: 'serve' };
    let replicator: import('../lib/replication/replicator.js').Replicator | undefined;
    try {
      // Before anything listens: a replication that cannot run is a configuration to fix.
      if (settings.backup.replication) {
        replicator = await (await import('../lib/replication/replicator.js')).Replicator.prepare({
          databasePath: settings.database.url,
          settings: settings.backup.replication,
          backupKey: settings.backup.encryptionKey,
          environment: process.env,
          parentPid: process.pid,
          log,
          onStalled: (target, lagSeconds, lastError) => {
            log({ level: 'warn', msg: 'replication stalled', target, lag_s: lagSeconds, ...(lastError ? { error: lastError } : {}) });
            void import('../lib/notifications/outbox.js')
              .then(({ raiseEvent }) => raiseEvent(state?.db ?? db, 'backup.replication_stalled', { target, lag_seconds: lagSeconds, last_error: lastError ?? null }))
              .catch((error: unknown) => log({ level: 'warn', msg: 'cannot raise backup.replication_stalled', error: String(error).slice(0, 200) }));
          },
        });
      }
      const key = await ensureSigningKey(db, context);
      // Sealed keys without the right key-encryption key: refuse to start (SIGNING_KEK_REQUIRED
      // or SIGNING_KEK_WRONG) rather than serve a daemon that fails every checkout.
      await getSigner(db);
      // Keys from before endorsements (or made by a process without the key-encryption key) get theirs now.
      await (await import('../lib/signing-keys/endorsements.js')).endorseKeys(db, context);
      state = new ServingState(
        db,
        config,
        (current) => openDatabase(current.settings.database.url, {
          applicationName: DAEMON_APPLICATION_NAME,
          serving: true,
          checkpointsByLitestream: replicating,
          keyEncryptionKey: current.settings.signing.keyEncryptionKey,
          timeouts: current.settings.database,
          observer: metrics.storage,
        }),
        () => this.resolveConfig(),
        async (database, current) => (await import('../lib/storage/admin-databases.js')).openAdminDatabases(database, {
          url: current.settings.database.url,
          applicationName: DAEMON_APPLICATION_NAME,
          timeouts: current.settings.database,
          keyEncryptionKey: current.settings.signing.keyEncryptionKey,
        }),
      );
      await state.openAdminSide();
      state.daemonLock = daemonLock;
      state.refusal = fence.refusal;
      const current = state;
      // The outbox's deliveries: raised by this daemon's work (woken at once) or by command
      // lines and other daemons (found by polling).
      const [{ delivererFor }, { onRaised }] = await Promise.all([import('../lib/notifications/from-config.js'), import('../lib/notifications/outbox.js')]);
      const deliverer = delivererFor(() => current.db, () => current.config, log);
      const stopWaking = onRaised(() => deliverer.wake());
      deliverer.start({ pruneAfterDays: () => current.config.settings.notifications.pruneAfterDays });
      // Off-site copies: on every daemon; each copy is claimed by one of them.
      const copier = settings.backup.targets.length > 0 || settings.backup.maxAgeMs !== undefined
        ? new (await import('../lib/backup/targets/copier.js')).Copier({ database: () => current.db, config: () => current.config, log })
        : undefined;
      state.copier = copier;
      state.replicator = replicator;
      const scheduler = settings.backup.enabled ? await this.scheduler(state, log) : undefined;
      const drills = settings.backup.drill.enabled ? await this.drills(state, log) : undefined;
      // Bulk jobs (POST /api/bulk): on every daemon; each job is claimed by one of them, and
      // one stopped mid-job is resumed by the next to look.
      const [{ BulkRunner }, { bulkSelection }] = await Promise.all([import('../lib/bulk/runner.js'), import('../http/bulk-selection.js')]);
      const bulk = new BulkRunner({ database: () => current.db, select: bulkSelection, log });
      // license.expiring_soon and license.expired: on every daemon; each round runs on one of them.
      const { LicenseClockScheduler, SYSTEM_CLOCK } = await import('../lib/notifications/license-clock-scheduler.js');
      const licenseClock = new LicenseClockScheduler({ database: () => current.db, clock: SYSTEM_CLOCK, windows: () => current.config.settings.notifications.expiringSoonDays, log });
      const app = createApp({ state, log, toolVersion: this.config.version, scheduler, metrics });
      const limits = { maxConnections: settings.server.maxConnections, maxPerAddress: settings.server.maxConnectionsPerAddress };
      const server = await listen(app, { host: settings.server.host, port: settings.server.port, tls, requestTimeout: settings.server.requestTimeout, limits });
      const metricsListener = settings.server.metricsPort === undefined
        ? undefined
        : await (await import('../http/metrics-listener.js')).listenForMetrics(metrics, { host: settings.server.metricsHost, port: settings.server.metricsPort, log, requestTimeout: settings.server.requestTimeout, limits }).catch(async (error: unknown) => {
          await server.shutdown(0);
          throw error;
        });
      // Only once both listeners listen: a start that fails before it (LISTEN_FAILED) would
      // leave a token nobody was shown, and the next start would see it and make none.
      const token = settings.adminToken ? undefined : await bootstrapAdminToken(db, context).catch(async (error: unknown) => {
        await metricsListener?.close();
        await server.shutdown(0);
        throw error;
      });
      // Handlers first: a supervisor may send SIGTERM the moment it sees the banner.
      const stopped = new Promise<void>((resolve) => {
        const stop = (signal: NodeJS.Signals) => {
          log({ time: new Date().toISOString(), level: 'info', msg: 'shutting down', signal });
          process.once(signal, () => process.exit(1));
          scheduler?.stop();
          drills?.stop();
          licenseClock.stop();
          // Its batch under way commits, and the job goes back to the queue, before the database closes.
          const bulkStopped = bulk.stop(5000);
          void copier?.stop(3000);
          stopWaking();
          void metricsListener?.close();
          void server.shutdown().then(() => scheduler?.idle()).then(() => drills?.idle()).then(() => licenseClock.idle()).then(() => deliverer.stop(3000)).then(() => bulkStopped).then(() => replicator?.stop()).then(() => resolve());
        };
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
      });
      // One write, so that whoever reads the banner gets it whole.
      this.log([
        `license-server listening on ${server.url} (database: ${db.engine} ${db.location})`,
        ...(metricsListener ? [`metrics listening on ${metricsListener.url} (no token)`] : []),
        `signing key fingerprint: ${key.fingerprint}`,
        token
          ? `admin token (shown only this once, store it now): ${token}`
          : `admin token: none created (${settings.adminToken ? 'LICENSE_ADMIN_TOKEN is set' : 'tokens exist; see `license-server token list`'})`,
      ].join('\n'));
      // The catch-up of a missed backup runs while the daemon already serves.
      void scheduler?.start().catch((error: unknown) => log({ level: 'error', msg: 'backup scheduler failed to start', error: String(error) }));
      void licenseClock.start();
      copier?.start();
      replicator?.start();
      drills?.start();
      bulk.start();
      await stopped;
      // A delivery attempt still waiting for its receiver must not hold the process past its shutdown.
      setTimeout(() => process.exit(process.exitCode ?? 0), 200);
    } finally {
      await replicator?.stop();
      // After a restore the state holds a reopened database; closing twice is harmless.
      await (state ? state.closeDatabase() : db.close()).catch(() => undefined);
      await announcement.release();
      await daemonLock.release();
    }
  }
}

type ServingStateType = import('../http/serving-state.js').ServingState;

function readPem(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new LicenseServerError('FILE_UNREADABLE', `cannot read ${file}: ${describeFsError(error)}`);
  }
}
