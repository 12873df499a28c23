import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { LicenseServerError, type ErrorCode } from '../errors.js';
import type { BackupTasks } from './backup-tasks.js';

// The tasks module beside this one, with this module's own extension (.js when built, .ts
// when the tests run the sources).
const TASKS = new URL(`./backup-tasks${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;

const YOUNG_GENERATION_MB = 4;

// Written to run as CommonJS or as an ES module (a parent started with --input-type=module
// passes that on to eval workers): no require, no top-level await.
const WORKER = `
import('node:worker_threads').then(({ workerData, parentPort }) => {
  // Only the test suite runs the TypeScript sources; a worker does not inherit its loader.
  const loader = workerData.module.endsWith('.ts') ? import('tsx/esm/api').then((tsx) => tsx.register()) : Promise.resolve();
  const tasks = loader.then(() => import(workerData.module));
  parentPort.on('message', ({ id, task, args }) => {
    let pending = 0;
    const report = (bytes) => {
      pending += bytes;
      if (pending >= 1048576) { parentPort.postMessage({ id, progress: pending }); pending = 0; }
    };
    tasks.then((module) => module.BACKUP_TASKS[task](...args, report)).then(
      (result) => { if (pending) parentPort.postMessage({ id, progress: pending }); parentPort.postMessage({ id, ok: true, result }); },
      (error) => parentPort.postMessage({ id, ok: false, error: {
        name: error && error.name, code: error && error.code, message: String((error && error.message) || error),
        hint: error && error.hint, syscall: error && error.syscall, errno: error && error.errno, path: error && error.path } }),
    );
  });
});
`;

interface Failure {
  readonly name?: string;
  readonly code?: string;
  readonly message: string;
  readonly hint?: string;
  readonly syscall?: string;
  readonly errno?: number;
  readonly path?: string;
}

type Task = keyof BackupTasks;
type Args<K extends Task> = Parameters<BackupTasks[K]> extends [...infer Rest, (bytes: number) => void] ? Rest : Parameters<BackupTasks[K]>;
interface Pending {
  resolve(result: unknown): void;
  reject(error: unknown): void;
  onProgress?: (bytes: number) => void;
}

// A worker is started at the first task and kept while tasks follow (a backup runs three);
// idle this long, it ends, so that a daemon does not keep its memory between backups.
const IDLE_MS = 10_000;
interface SharedWorker {
  readonly worker: Worker;
  readonly pending: Map<number, Pending>;
  idle?: NodeJS.Timeout;
}
let shared: SharedWorker | undefined;
let nextId = 0;

function backupWorker(): SharedWorker {
  if (shared) return shared;
  // A small young generation: what the steps allocate is Buffers, whose bytes live outside
  // the heap, and the default one would add ~30 MB of peak memory to the process.
  const worker = new Worker(WORKER, { eval: true, workerData: { module: TASKS }, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
  const state: SharedWorker = { worker, pending: new Map() };
  const failAll = (error: unknown) => {
    if (shared === state) shared = undefined;
    for (const task of state.pending.values()) task.reject(error);
    state.pending.clear();
  };
  worker.on('message', (message: { id: number; progress?: number; ok?: boolean; result?: unknown; error?: Failure }) => {
    const task = state.pending.get(message.id);
    if (!task) return;
    if (message.progress !== undefined) return task.onProgress?.(message.progress);
    state.pending.delete(message.id);
    if (state.pending.size === 0) idle(state);
    if (message.ok) task.resolve(message.result);
    else task.reject(revive(message.error!));
  });
  worker.once('error', failAll);
  worker.once('exit', (code) => failAll(new Error(`the backup worker exited with ${code}`)));
  shared = state;
  return state;
}

function idle(state: SharedWorker): void {
  // Waiting for the next task must not keep a finished command's process alive.
  state.worker.unref();
  state.idle = setTimeout(() => {
    if (shared === state) shared = undefined;
    void state.worker.terminate();
  }, IDLE_MS).unref();
}

/**
 * Runs a byte-heavy backup step on a worker thread. Not for parallelism (the steps already
 * use the thread pool) but for the garbage collector: every Buffer the step allocates counts
 * as external memory, and in the CLI's isolate, whose heap holds oclif and the whole
 * application, that pressure triggered ~200 full collections in one 1.3 GB backup (a few
 * seconds of CPU on two cores) where a fresh isolate needs a handful. A daemon keeps
 * answering meanwhile, too. Errors come back with their code, hint and system-call fields.
 */
export function inWorker<K extends Task>(task: K, args: Args<K>, onProgress?: (bytes: number) => void): Promise<Awaited<ReturnType<BackupTasks[K]>>> {
  const state = backupWorker();
  clearTimeout(state.idle);
  state.worker.ref();
  const id = nextId++;
  return new Promise((resolve, reject) => {
    state.pending.set(id, { resolve: resolve as (result: unknown) => void, reject, onProgress });
    state.worker.postMessage({ id, task, args });
  });
}

function revive(failure: Failure): Error {
  if (failure.name === 'LicenseServerError' && failure.code) return new LicenseServerError(failure.code as ErrorCode, failure.message, { hint: failure.hint });
  const error = new Error(failure.message) as NodeJS.ErrnoException;
  if (failure.code !== undefined) error.code = failure.code;
  if (failure.syscall !== undefined) error.syscall = failure.syscall;
  if (failure.errno !== undefined) error.errno = failure.errno;
  if (failure.path !== undefined) error.path = failure.path;
  return error;
}
