import { Worker } from 'node:worker_threads';
import { LicenseServerError } from '../../errors.js';
import { isDeviceRefusal } from '../../fs-errors.js';
import { loadSqliteDriver, sqliteDriverPath } from '../../storage/sqlite-driver.js';

// Runs in a worker thread: VACUUM INTO and the integrity checks take seconds per gigabyte,
// and on the main thread a daemon would stop answering for that long.
const WORKER = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.module);
try {
  const db = new Database(workerData.file, { readonly: true, fileMustExist: true, timeout: 5000 });
  try {
    if (workerData.op === 'snapshot') {
      db.prepare('VACUUM INTO ?').run(workerData.target);
      parentPort.postMessage({ ok: true });
    } else {
      parentPort.postMessage({ ok: true, rows: db.pragma(workerData.op).map((row) => String(Object.values(row)[0])) });
    }
  } finally {
    db.close();
  }
} catch (error) {
  parentPort.postMessage({ ok: false, code: error.code, message: error.message });
}
`;

interface WorkerAnswer {
  readonly ok: boolean;
  readonly rows?: string[];
  readonly code?: string;
  readonly message?: string;
}

function inWorker(work: { op: 'snapshot' | 'quick_check' | 'integrity_check'; file: string; target?: string }): Promise<WorkerAnswer> {
  const module = sqliteDriverPath();
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { eval: true, workerData: { module, ...work } });
    worker.once('message', (answer: WorkerAnswer) => resolve(answer));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the SQLite worker exited with ${code}`)));
  });
}

/**
 * A consistent copy of a live SQLite database with VACUUM INTO, on a connection of its own:
 * it reads one snapshot and finishes even while other processes commit every few
 * milliseconds (the online backup API copying in small steps restarts on every commit and
 * may never finish), and it never copies the live file, which would lose what is still only
 * in the WAL. The copy is a fresh file without the WAL flag.
 */
export async function snapshotSqlite(source: string, target: string): Promise<void> {
  const answer = await inWorker({ op: 'snapshot', file: source, target });
  if (!answer.ok) {
    const code = answer.code;
    // The caller names its directory (asWriteFailure); the code says why.
    if (isDeviceRefusal(answer)) throw Object.assign(new Error(`cannot write the database snapshot: ${answer.message}`), { code });
    if (code === 'SQLITE_CANTOPEN') throw new LicenseServerError('FILE_WRITE_FAILED', `cannot write the database snapshot ${target}: ${code}`);
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot snapshot the SQLite database: ${answer.message}`);
  }
  await checkSqlite(target, 'quick_check');
}

/** PRAGMA quick_check (cheap, before packing) or integrity_check (thorough, for validate and restore). */
export async function checkSqlite(file: string, check: 'quick_check' | 'integrity_check'): Promise<void> {
  const answer = await inWorker({ op: check, file });
  if (!answer.ok) {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: the SQLite database does not open (${answer.message})`);
  }
  const rows = answer.rows ?? [];
  if (rows.length !== 1 || rows[0] !== 'ok') {
    throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${check} of the SQLite database reports ${rows.slice(0, 3).join('; ')}`);
  }
}

/** The schema version recorded in a SQLite database file. */
export async function sqliteSchemaVersion(file: string): Promise<number> {
  const Database = loadSqliteDriver();
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null } | undefined;
    return Number(row?.version ?? 0);
  } catch {
    return 0;
  } finally {
    db.close();
  }
}
