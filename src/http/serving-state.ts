import type { DaemonLock } from '../lib/backup/locks/daemon-lock.js';
import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { LicenseServerError } from '../lib/errors.js';
import { forgetSigner } from '../lib/signing-keys/signer.js';
import type { AdminDatabases } from '../lib/storage/admin-databases.js';
import type { Database } from '../lib/storage/types.js';

/**
 * What the daemon serves from, and may replace while it runs: the open database and the
 * configuration. Routes read them through this object at request time, so a restore can
 * close the database, swap it, and reopen it between two requests.
 */
export class ServingState {
  private database: Database | undefined;
  /** What admin routes use (storage/admin-databases.ts); the database itself when there is no opener. */
  private admin: AdminDatabases | undefined;
  /** The lock `serve` holds on the database for its whole life; absent when tests drive the app alone. */
  daemonLock: DaemonLock | undefined;
  /** Why every request but /healthz is refused right now (the daemon lost its database lock). */
  refusal: LicenseServerError | undefined;
  /** Copies new backups off-site (backup/targets/copier.ts); absent without targets or when tests drive the app alone. */
  copier: { noteBackup(backupId: string): Promise<void> } | undefined;
  /** Litestream's supervisor (replication/replicator.ts); absent without backup.replication. */
  replicator: import('../lib/replication/replicator.js').Replicator | undefined;

  constructor(
    database: Database,
    public config: ResolvedConfig,
    private readonly open: (config: ResolvedConfig) => Promise<Database>,
    /** Resolves the configuration again (flags, environment, the restored config.yaml). */
    readonly reloadConfig: () => Promise<ResolvedConfig>,
    /** Opens the admin side beside a database just opened (absent: admin routes use the database). */
    private readonly openAdmin?: (database: Database, config: ResolvedConfig) => Promise<AdminDatabases>,
  ) {
    this.database = database;
  }

  get db(): Database {
    if (!this.database) throw new Error('the database is being replaced');
    return this.database;
  }

  /** For admin GET routes. */
  get adminReads(): Database {
    return this.admin?.reads ?? this.db;
  }

  /** For admin routes that change something. */
  get adminWrites(): Database {
    return this.admin?.writes ?? this.db;
  }

  /** For the background read of the store's figures (/metrics). */
  get figureReads(): Database {
    return this.admin?.figures ?? this.db;
  }

  /** Opens the admin side for the database open now (at start; reopen does it itself). */
  async openAdminSide(): Promise<void> {
    if (this.openAdmin && !this.admin) this.admin = await this.openAdmin(this.db, this.config);
  }

  /** Closes the database (SQLite: its one shared connection), so its file can be swapped. */
  async closeDatabase(): Promise<void> {
    await this.closeAdminSide();
    const database = this.database;
    this.database = undefined;
    if (database) {
      forgetSigner(database);
      await database.close();
    }
  }

  /** Opens the database again, with the configuration reloaded if `reload` is set. */
  async reopen(reload: boolean): Promise<void> {
    if (reload) {
      const fresh = await this.reloadConfig();
      // Where the daemon listens cannot change without a restart; everything else may.
      this.config = { ...fresh, settings: { ...fresh.settings, server: this.config.settings.server } };
    }
    await this.closeAdminSide();
    if (this.database) {
      forgetSigner(this.database);
      await this.database.close();
    }
    this.database = await this.open(this.config);
    await this.openAdminSide();
  }

  private async closeAdminSide(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    await admin?.close();
  }
}
