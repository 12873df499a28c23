import { spawn, type ChildProcess } from 'node:child_process';
import { watch } from 'node:fs';
import { openDatabase } from '../../src/lib/storage/open.js';
import { CLI } from './cli.js';
import { api } from './serve.js';
import { scaledMs } from './busy-machine.js';

/** A CLI process the test can stop and continue (SIGSTOP/SIGCONT) to hold it in one phase. */
export interface RunningCli {
  readonly child: ChildProcess;
  /** Set once the process has exited. */
  readonly done: boolean;
  readonly exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
  pause(): void;
  resume(): void;
}

const running = new Set<ChildProcess>();

/** Kills what a failed test left running (or stopped), so that mocha can exit. */
export function killAllClis(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

export function startCli(args: readonly string[], env: Record<string, string>): RunningCli {
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) clean[name] = value;
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  running.add(child);
  child.once('exit', () => running.delete(child));
  const state = { done: false };
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => {
      state.done = true;
      resolve({ code, stdout, stderr });
    }),
  );
  return {
    child,
    get done() {
      return state.done;
    },
    exited,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
  };
}

export async function waitUntil(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const limit = scaledMs(timeoutMs);
  const deadline = Date.now() + limit;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${limit} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/**
 * Stops `cli` (SIGSTOP) the moment a backup begins in `directory` (for a restore: its
 * pre-restore backup, which follows its check for daemons), or resolves when it ends first.
 * inotify tells at once; polling would often see the backup only once it is done. Resolves
 * whether the process was stopped (usually still in that backup; at worst a little later,
 * which is still past its check and before its end).
 */
export function pauseWhenBackupBegins(directory: string, cli: RunningCli): Promise<boolean> {
  return new Promise((resolve) => {
    const watcher = watch(directory, (_event, name) => {
      if (!String(name ?? '').startsWith('.tmp-') || cli.done) return;
      cli.pause();
      watcher.close();
      resolve(true);
    });
    void cli.exited.then(() => {
      watcher.close();
      resolve(false);
    });
  });
}

/** What a writer got back: the ids of the customers acknowledged with 201, and every other answer. */
export interface Writes {
  readonly acknowledged: string[];
  readonly refused: Array<{ status: number; code: string | undefined }>;
}

/**
 * POST /api/customers one after another until `stop()` holds and `after` more have been
 * sent; network errors (a daemon going away) end it.
 */
export async function writeCustomers(base: string, token: string, stop: () => boolean, after = 10, writes: Writes = { acknowledged: [], refused: [] }): Promise<Writes> {
  let extra = 0;
  for (let n = 0; ; n += 1) {
    if (stop()) {
      if (extra >= after) return writes;
      extra += 1;
    }
    const response = await api(base, 'POST', '/api/customers', { token, body: { name: `written ${n}` } }).catch(() => undefined);
    if (!response) return writes;
    if (response.status === 201) writes.acknowledged.push(response.body.id);
    else writes.refused.push({ status: response.status, code: response.body?.error?.code });
  }
}

export async function customerIds(url: string): Promise<Set<string>> {
  const db = await openDatabase(url, { migrate: false });
  try {
    return new Set((await db.query<{ id: string }>('SELECT id FROM customers')).map((row) => row.id));
  } finally {
    await db.close();
  }
}

/** The acknowledged writes that are not in the database. */
export async function lostWrites(url: string, writes: Writes): Promise<string[]> {
  const kept = await customerIds(url);
  return writes.acknowledged.filter((id) => !kept.has(id));
}
