import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { scaledMs } from './busy-machine.js';
import { startPrivatePostgres, type PrivatePostgres } from './private-postgres.js';

export const PGBACKREST = process.env.LICENSE_TEST_PGBACKREST || '/usr/bin/pgbackrest';
const STANZA = 'license';

/**
 * A private PostgreSQL cluster that archives its WAL with pgBackRest into a repository in a
 * local directory, set up as docs/replication.md ("PostgreSQL") tells an operator: the same
 * archive_command, an encrypted repository, a full backup to start from. The repository
 * stands for the off-site target (the docs' S3 form differs in the repo1-* lines only).
 */
export interface ArchivingPostgres {
  readonly cluster: PrivatePostgres;
  /** The pgBackRest configuration file. */
  readonly config: string;
  readonly repository: string;
  pgbackrest(...args: string[]): Promise<string>;
  /** SQL as the cluster's superuser, on its `postgres` database. */
  sql<R extends Record<string, unknown> = Record<string, unknown>>(text: string): Promise<R[]>;
  /** Ends the WAL file under way (pg_switch_wal) and waits until PostgreSQL has archived it: the name. */
  archiveNow(): Promise<string>;
  /**
   * The host is lost: the server killed (no shutdown checkpoint), its data directory removed,
   * then restored from the repository alone and started, out of recovery. `to`: the moment to
   * restore to (a point-in-time restore); without it, everything archived.
   */
  loseAndRestore(to?: Date): Promise<void>;
  destroy(): Promise<void>;
}

export function pgbackrestMissing(): string | undefined {
  return existsSync(PGBACKREST) ? undefined : `no pgBackRest at ${PGBACKREST} (Debian's pgbackrest package; .ci/run installs it)`;
}

export async function startArchivingPostgres(options: { readonly archiveTimeoutSeconds: number }): Promise<ArchivingPostgres> {
  const home = mkdtempSync(path.join(tmpdir(), 'license-pgbackrest-'));
  const config = path.join(home, 'pgbackrest.conf');
  const repository = path.join(home, 'repo');
  for (const dir of [repository, path.join(home, 'log'), path.join(home, 'lock'), path.join(home, 'spool')]) mkdirSync(dir);
  if (process.getuid?.() === 0) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    for (const dir of [home, repository, path.join(home, 'log'), path.join(home, 'lock'), path.join(home, 'spool')]) chownSync(dir, id('-u'), id('-g'));
  }
  const cluster = await startPrivatePostgres({
    // 1 MB WAL files, not 16: each archive_timeout switch archives (and a restore replays) a
    // file padded to its full size, which at 16 MB made the suite's rounds slow.
    initdb: ['--wal-segsize=1'],
    settings: {
      archive_mode: 'on',
      archive_command: `${PGBACKREST} --config=${config} --stanza=${STANZA} archive-push %p`,
      archive_timeout: String(options.archiveTimeoutSeconds),
      wal_level: 'replica',
    },
  });
  writeFileSync(config, [
    '[global]',
    `repo1-path=${repository}`,
    'repo1-cipher-type=aes-256-cbc',
    'repo1-cipher-pass=test-repository-passphrase-0123456789',
    'repo1-retention-full=2',
    'start-fast=y',
    'log-level-console=warn',
    'log-level-file=info',
    `log-path=${path.join(home, 'log')}`,
    `lock-path=${path.join(home, 'lock')}`,
    `spool-path=${path.join(home, 'spool')}`,
    '',
    `[${STANZA}]`,
    `pg1-path=${cluster.dataDir}`,
    `pg1-port=${cluster.port}`,
    `pg1-socket-path=${cluster.dir}`,
    'pg1-user=postgres',
    '',
  ].join('\n'), { mode: 0o644 });
  const pgbackrest = async (...args: string[]) => {
    try {
      return (await cluster.runAs(PGBACKREST, [`--config=${config}`, `--stanza=${STANZA}`, ...args])).stdout;
    } catch (error) {
      const failed = error as Error & { stderr?: string; stdout?: string };
      throw new Error(`pgbackrest ${args.join(' ')} failed: ${failed.message}\n${failed.stdout ?? ''}${failed.stderr ?? ''}`);
    }
  };
  const sql = async <R extends Record<string, unknown>>(text: string): Promise<R[]> => {
    const client = new pg.Client({ connectionString: cluster.adminUrl });
    await client.connect();
    try {
      return (await client.query(text)).rows as R[];
    } finally {
      await client.end();
    }
  };
  const untilOutOfRecovery = async () => {
    const deadline = Date.now() + scaledMs(60_000);
    for (;;) {
      const inRecovery = await sql<{ r: boolean }>('SELECT pg_is_in_recovery() AS r').then((rows) => rows[0]!.r, () => true);
      if (!inRecovery) return;
      if (Date.now() > deadline) throw new Error('the restored cluster did not leave recovery');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  await pgbackrest('stanza-create');
  await pgbackrest('check');
  await pgbackrest('backup', '--type=full');
  return {
    cluster,
    config,
    repository,
    pgbackrest,
    sql,
    async archiveNow() {
      const [switched] = await sql<{ wal: string }>('SELECT pg_walfile_name(pg_switch_wal()) AS wal');
      const deadline = Date.now() + scaledMs(30_000);
      for (;;) {
        const [archiver] = await sql<{ last: string | null }>('SELECT last_archived_wal AS last FROM pg_stat_archiver');
        if (archiver!.last !== null && archiver!.last.slice(0, 24) >= switched!.wal) return switched!.wal;
        if (Date.now() > deadline) throw new Error(`${switched!.wal} was not archived: the last is ${archiver!.last}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async loseAndRestore(to) {
      // Killed already, or killed now.
      if (existsSync(path.join(cluster.dataDir, 'postmaster.pid'))) await cluster.kill();
      rmSync(cluster.dataDir, { recursive: true, force: true });
      mkdirSync(cluster.dataDir, { mode: 0o700 });
      if (process.getuid?.() === 0) {
        const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
        chownSync(cluster.dataDir, id('-u'), id('-g'));
      }
      // pgBackRest's own restore, as docs/replication.md gives it; recovery_target_action
      // promote: the restored server takes writes once it reaches the moment.
      await pgbackrest('restore', ...(to ? ['--type=time', `--target=${to.toISOString().replace('T', ' ').replace('Z', '+00')}`, '--target-action=promote'] : []));
      await cluster.start();
      await untilOutOfRecovery();
    },
    async destroy() {
      await cluster.destroy();
      rmSync(home, { recursive: true, force: true });
    },
  };
}
