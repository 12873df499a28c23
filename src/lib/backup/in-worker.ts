import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { LicenseServerError, type ErrorCode } from '../errors.js';
import type { BackupTasks } from './backup-tasks.js';

// The tasks module beside this one, with this module's own extension (.js when built, .ts
// when the tests run the sources).
const TASKS = new URL(`./backup-tasks${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;

const YOUNG_GENERATION_MB = 4;

const WORKER = `
const { workerData, parentPort } = require('node:worker_threads');
let pending = 0;
const report = (bytes) => {
  pending += bytes;
  if (pending >= 1048576) { parentPort.postMessage({ progress: pending }); pending = 0; }
};
// Only the test suite runs the TypeScript sources; a worker does not inherit its loader.
const loader = workerData.module.endsWith('.ts') ? import('tsx/esm/api').then((tsx) => tsx.register()) : Promise.resolve();
loader.then(() => import(workerData.module)).then((tasks) => tasks.BACKUP_TASKS[workerData.task](...workerData.args, report)).then(
  (result) => { if (pending) parentPort.postMessage({ progress: pending }); parentPort.postMessage({ ok: true, result }); },
  (error) => parentPort.postMessage({ ok: false, error: {
    name: error && error.name, code: error && error.code, message: String((error && error.message) || error),
    hint: error && error.hint, syscall: error && error.syscall, errno: error && error.errno, path: error && error.path } }),
);
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

/**
 * Runs a byte-heavy backup step on a worker thread. Not for parallelism (the steps already
 * use the thread pool) but for the garbage collector: every Buffer the step allocates counts
 * as external memory, and in the CLI's isolate, whose heap holds oclif and the whole
 * application, that pressure triggered ~200 full collections in one 1.3 GB backup (a few
 * seconds of CPU on two cores) where a fresh isolate needs a handful. A daemon keeps
 * answering meanwhile, too. Errors come back with their code, hint and system-call fields.
 */
export function inWorker<K extends Task>(task: K, args: Args<K>, onProgress?: (bytes: number) => void): Promise<Awaited<ReturnType<BackupTasks[K]>>> {
  return new Promise((resolve, reject) => {
    // A small young generation: what the steps allocate is Buffers, whose bytes live outside
    // the heap, and the default one would add ~30 MB of peak memory to the process.
    const worker = new Worker(WORKER, { eval: true, workerData: { module: TASKS, task, args }, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
    let settled = false;
    worker.on('message', (message: { progress?: number; ok?: boolean; result?: unknown; error?: Failure }) => {
      if (message.progress !== undefined) return onProgress?.(message.progress);
      settled = true;
      if (message.ok) resolve(message.result as Awaited<ReturnType<BackupTasks[K]>>);
      else reject(revive(message.error!));
    });
    worker.once('error', (error) => {
      settled = true;
      reject(error);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`the backup worker exited with ${code}`));
    });
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
