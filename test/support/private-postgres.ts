import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './license-fixture.js';

const BIN = process.env.LICENSE_TEST_POSTGRES_BIN || '/usr/lib/postgresql/15/bin';
const run = promisify(execFile);

/**
 * A PostgreSQL cluster of the test's own (initdb + pg_ctl in a temporary directory, on a
 * free loopback port), for tests that stop, restart or kill the server: the shared one on
 * 5432 serves every other suite and must never be touched. Under root it runs as the
 * `postgres` OS user, which initdb requires.
 */
export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:PORT/postgres (trust authentication). */
  readonly adminUrl: string;
  /** A URL of a database on this cluster, created empty. */
  createDatabase(name: string): Promise<string>;
  /** pg_ctl stop -m fast: every session is told the server is shutting down (57P01), then it is gone. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** pg_ctl stop -m immediate: the server dies as with a power cut (no checkpoint, no goodbye to sessions). */
  kill(): Promise<void>;
  /** Stops and removes the cluster. */
  destroy(): Promise<void>;
  /** The cluster's data directory, its socket directory (the temporary one that holds both) and port. */
  readonly dataDir: string;
  readonly dir: string;
  readonly port: number;
  /** Runs a program as the cluster's OS user (postgres under root), in its directory. */
  runAs(file: string, args: readonly string[], env?: Record<string, string>): Promise<{ stdout: string; stderr: string }>;
}

export interface PrivatePostgresOptions {
  /** Lines for postgresql.conf, written after initdb (archive_mode and the like need them at start). */
  readonly settings?: Readonly<Record<string, string>>;
  /** More initdb arguments, such as --wal-segsize. */
  readonly initdb?: readonly string[];
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/**
 * Starts a private cluster for the enclosing describe(), stopped and removed after it.
 * Without PostgreSQL's binaries it skips, loudly; under CI=true it fails instead.
 */
export function usePrivatePostgres(): () => PrivatePostgres {
  let cluster: PrivatePostgres | undefined;
  before(async function () {
    this.timeout(60_000);
    try {
      cluster = await startPrivatePostgres();
    } catch (error) {
      if (process.env.CI === 'true') throw new Error(`a private PostgreSQL cluster is required under CI=true but cannot be started: ${(error as Error).message}`);
      console.warn(`    (skipping: cannot start a private PostgreSQL cluster: ${(error as Error).message})`);
      this.skip();
    }
  });
  after(async () => {
    await cluster?.destroy();
  });
  return () => {
    if (!cluster) throw new Error('the private PostgreSQL cluster is not started yet');
    return cluster;
  };
}

export async function startPrivatePostgres(options: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
  if (!existsSync(path.join(BIN, 'initdb'))) throw new Error(`no initdb in ${BIN} (set LICENSE_TEST_POSTGRES_BIN)`);
  const user = postgresUser();
  const dir = mkdtempSync(path.join(tmpdir(), 'license-private-pg-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = path.join(dir, 'data');
  const log = path.join(dir, 'server.log');
  const port = await freePort();
  const as = user ? { uid: user.uid, gid: user.gid } : {};
  const pgCtl = async (...args: string[]) => {
    try {
      await run(path.join(BIN, 'pg_ctl'), ['-D', data, '-l', log, '-w', '-t', '30', ...args], { ...as, cwd: dir });
    } catch (error) {
      const tail = existsSync(log) ? readFileSync(log, 'utf8').split('\n').slice(-10).join('\n') : '';
      throw new Error(`pg_ctl ${args[0]} failed: ${(error as Error).message}\n${tail}`);
    }
  };
  let running = false;
  // A run that dies before its after() hooks must not leave a server behind.
  const stopAtExit = () => {
    if (running) execFileSync(path.join(BIN, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop'], { ...as, stdio: 'ignore' });
  };
  process.once('exit', stopAtExit);
  try {
    await run(path.join(BIN, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', ...(options.initdb ?? [])], { ...as, cwd: dir });
    const settings = Object.entries(options.settings ?? {}).map(([name, value]) => `${name} = '${value.replace(/'/g, "''")}'\n`).join('');
    if (settings) appendFileSync(path.join(data, 'postgresql.conf'), settings);
    // Small and fast: a cluster of a few test databases, thrown away after.
    const serverOptions = [`-p ${port}`, `-k ${dir}`, "-c listen_addresses=127.0.0.1", '-c fsync=off', '-c shared_buffers=16MB', '-c max_connections=60'].join(' ');
    const start = async () => {
      await pgCtl('start', '-o', serverOptions);
      running = true;
    };
    await start();
    const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
    return {
      adminUrl,
      async createDatabase(name) {
        await run(path.join(BIN, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', name], { ...as, cwd: dir });
        return `postgres://postgres@127.0.0.1:${port}/${name}`;
      },
      async stop() {
        await pgCtl('stop', '-m', 'fast');
        running = false;
      },
      async kill() {
        await pgCtl('stop', '-m', 'immediate');
        running = false;
      },
      start,
      dataDir: data,
      dir,
      port,
      runAs: (file, args, env) => run(file, [...args], { ...as, cwd: dir, ...(env ? { env: { ...process.env, ...env } } : {}) }),
      async destroy() {
        process.off('exit', stopAtExit);
        if (running) await pgCtl('stop', '-m', 'immediate').catch(() => undefined);
        running = false;
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    process.off('exit', stopAtExit);
    if (running) await pgCtl('stop', '-m', 'immediate').catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
