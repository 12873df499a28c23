import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { listBackups } from '../../src/lib/backup/repository.js';
import { TABLES } from '../../src/lib/storage/migrations.js';
import { killedAfter, killedWhen, ok, runCli } from '../support/cli.js';
import { fillStore } from '../support/fill-store.js';
import { faultSeed, measuredSpan, spreadOver } from '../support/kill-moments.js';
import { ADMIN_URL, createTestDatabase, requirePostgres } from '../support/postgres.js';
import { prng } from '../support/prng.js';
import { auditRows, differenceFrom, snapshotTables, type Snapshot } from '../support/tables.js';

const KEY = 'ab'.repeat(32);
// Printed, and taken from FAULT_SEED when set, so that a failing run's delays can be replayed.
const SEED = faultSeed();
const KILLS = Number(process.env.CROSS_ENGINE_KILLS ?? 22);
// Sized so that an unkilled restore takes a second or two: long enough for kills to land in
// every phase, short enough for 2 x KILLS of them in CI. A SQLite target takes in rows about
// three times as fast as a PostgreSQL one, so it gets three times as many.
const ROWS = Number(process.env.CROSS_ENGINE_ROWS ?? 1000);
const ROWS_INTO_SQLITE = 3 * ROWS;

interface Target {
  readonly env: Record<string, string>;
  /** Where the restore makes its `.restore-*` staging directory. */
  readonly stagingParent: string;
  snapshot(): Promise<Snapshot>;
  /** Puts the old data back in place, bypassing license-server. */
  reset(): Promise<void>;
  /** Watches for the moment the restored data becomes the target's, as closely as it can be seen from outside. */
  watchSwap(): Promise<{ swapped(): boolean; stop(): Promise<void> }>;
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const names = (directory: string, prefix: string) => (existsSync(directory) ? readdirSync(directory).filter((name) => name.startsWith(prefix)) : []);

const preRestoreCount = async (directory: string) => (await listBackups(directory)).filter((backup) => backup.trigger === 'pre-restore').length;

/**
 * Where a kill landed, read from what it left: its own staging directory (new since the kill
 * before, which the next restore removes), the converted database in it, the pre-restore
 * backup's work directory or listing, the state of the target, the restore's audit entry.
 */
function phaseOf(evidence: { code: number | null; state: 'old' | 'restored'; staging: string[]; converted: boolean; backupWork: boolean; preRestoreListed: boolean; audited: boolean }): string {
  if (evidence.code === 0) return 'finished before the kill';
  if (evidence.state === 'restored') return evidence.audited ? 'after the audit entry' : 'after the swap, before the audit entry';
  if (evidence.preRestoreListed) return 'after the pre-restore backup, before the swap';
  if (evidence.backupWork) return 'during the pre-restore backup';
  if (evidence.converted) return 'converting';
  if (evidence.staging.length > 0) return 'validating';
  return 'starting (lock, target check)';
}

async function killRepeatedly(title: string, target: Target, backupFile: string, old: Snapshot, restored: Snapshot, direction: { from: string; to: string }): Promise<void> {
  const rng = prng(SEED ^ (direction.to === 'postgres' ? 0x5150 : 0xa0a0));
  const args = ['backup', 'restore', backupFile, '--yes', '--replace-keys'];
  const backupDir = target.env.LICENSE_BACKUP_PATH!;

  // Restores left to finish set the span the kills are spread over: the quicker of two, as a
  // busy machine makes one now and then much slower.
  let full: any;
  const span = await measuredSpan(async () => {
    full = ok(await runCli([...args, '--json'], { env: target.env })).json();
    assert.equal(differenceFrom(await target.snapshot(), restored), undefined, 'an unkilled restore brings the backup\'s data');
    assert.deepEqual(full.moved, { ...direction, rows: Object.fromEntries(TABLES.map((table) => [table.name, restored[table.name]!.length])) });
    await target.reset();
  });
  const delays = spreadOver(span, KILLS, rng, { low: 250 });
  const phases = new Map<string, number>();
  for (const [i, delay] of delays.entries()) {
    const stagingBefore = names(target.stagingParent, '.restore-');
    const workBefore = names(backupDir, '.tmp-');
    const preBefore = await preRestoreCount(backupDir);
    const code = await killedAfter(args, target.env, delay);
    const snapshot = await target.snapshot();
    const againstOld = differenceFrom(snapshot, old);
    const againstRestored = differenceFrom(snapshot, restored);
    const where = `${title}: kill ${i + 1} after ${delay} ms (seed ${SEED})`;
    assert.ok(againstOld === undefined || againstRestored === undefined, `${where} left neither the old data (${againstOld}) nor the restored data (${againstRestored})`);
    const staging = names(target.stagingParent, '.restore-').filter((name) => !stagingBefore.includes(name));
    const evidence = {
      code,
      state: againstOld === undefined ? ('old' as const) : ('restored' as const),
      staging,
      converted: staging.some((name) => names(path.join(target.stagingParent, name), 'converted-').length > 0),
      backupWork: names(backupDir, '.tmp-').some((name) => !workBefore.includes(name)),
      preRestoreListed: (await preRestoreCount(backupDir)) > preBefore,
      audited: auditRows(snapshot).some((entry) => entry.action === 'backup.restored'),
    };
    if (evidence.state === 'restored') assert.ok(evidence.preRestoreListed, `${where}: the old data was replaced without a listed pre-restore backup`);
    if (code === 0) assert.ok(evidence.state === 'restored' && evidence.audited, `${where}: exit 0 without the restored, audited data`);
    const phase = phaseOf(evidence);
    phases.set(phase, (phases.get(phase) ?? 0) + 1);
    await target.reset();
  }
  console.log(`      ${title}: unkilled restore ${span} ms; kills by phase: ${JSON.stringify(Object.fromEntries(phases))}`);
  // Short phases are not asserted here (a slice may miss them); the kills below make sure of them.
  const restoredOutcomes = [...phases].filter(([phase]) => /^(after the swap|after the audit|finished)/.test(phase)).reduce((sum, [, n]) => sum + n, 0);
  assert.ok(restoredOutcomes > 0 && restoredOutcomes < KILLS, `kills left both the old and the restored data: ${JSON.stringify(Object.fromEntries(phases))}`);

  // A kill just after the swap, made certain (random delays reach that short window only
  // now and then): the restored data stands, with or without its audit entry.
  const watch = await target.watchSwap();
  const preBefore = await preRestoreCount(backupDir);
  let swapKill: { code: number | null; hit: boolean };
  try {
    swapKill = await killedWhen(args, target.env, () => watch.swapped());
  } finally {
    await watch.stop();
  }
  assert.ok(swapKill.hit, 'the swap was seen before the restore finished');
  assert.equal(differenceFrom(await target.snapshot(), restored), undefined, 'killed just after the swap: the restored data');
  assert.ok((await preRestoreCount(backupDir)) > preBefore, 'with the old data in a listed pre-restore backup');
  await target.reset();

  // A kill during the pre-restore backup, made certain: its work directory is left.
  const workBefore = names(backupDir, '.tmp-');
  const duringBackup = await killedWhen(args, target.env, () => names(backupDir, '.tmp-').some((name) => !workBefore.includes(name)));
  assert.ok(duringBackup.hit, 'the pre-restore backup was caught in progress');
  assert.equal(differenceFrom(await target.snapshot(), old), undefined, 'killed during the pre-restore backup: the old data');
  assert.ok(names(backupDir, '.tmp-').length > 0, 'the killed backup left its work directory');

  // A kill in the middle of the conversion, made certain: its staging directory is left.
  const stagingBefore = names(target.stagingParent, '.restore-');
  const converting = await killedWhen(args, target.env, () =>
    names(target.stagingParent, '.restore-').some((name) => !stagingBefore.includes(name) && names(path.join(target.stagingParent, name), 'converted-').length > 0),
  );
  assert.ok(converting.hit, 'the conversion was caught in progress');
  assert.equal(differenceFrom(await target.snapshot(), old), undefined, 'killed while converting: the old data');
  assert.ok(names(target.stagingParent, '.restore-').length > 0, 'the killed restore left its staging directory');
  assert.ok(existsSync(path.join(backupDir, '.lock')), 'and its lock');

  // The next restore takes over the stale lock, removes what the killed ones left, and works.
  const report = ok(await runCli([...args, '--json'], { env: target.env })).json();
  assert.deepEqual(report.moved, full.moved);
  const after = await target.snapshot();
  assert.equal(differenceFrom(after, restored), undefined);
  assert.equal(auditRows(after).filter((entry) => entry.action === 'backup.restored').length, 1);
  assert.deepEqual(names(target.stagingParent, '.restore-'), [], 'no staging directory is left');
  assert.deepEqual(readdirSync(backupDir).filter((name) => name === '.lock' || name.startsWith('.tmp-') || name.endsWith('.partial')), []);

  // Its pre-restore backup is the old data, whole.
  ok(await runCli(['backup', 'restore', report.pre_restore_backup_id, '--yes', '--replace-keys'], { env: target.env }));
  assert.equal(differenceFrom(await target.snapshot(), old), undefined, 'the pre-restore backup holds the old data');
}

describe('cross-engine restore under SIGKILL at random moments', function () {
  this.timeout(240_000);
  let work: string;
  before(async function () {
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-cross-faults-'));
    console.log(`      seed ${SEED} (FAULT_SEED=${SEED} repeats these delays), ${KILLS} kills per direction, ${ROWS} (into PostgreSQL) and ${ROWS_INTO_SQLITE} (into SQLite) customers per store`);
  });
  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const sqliteEnv = (name: string) => ({
    LICENSE_DATA_DIR: path.join(work, name, 'data'),
    LICENSE_DATABASE_URL: path.join(work, name, 'data', 'license-server.db'),
    LICENSE_BACKUP_PATH: path.join(work, name, 'backups'),
    LICENSE_BACKUP_ENCRYPTION_KEY: KEY,
  });
  const postgresEnv = (name: string, url: string) => ({
    LICENSE_DATA_DIR: path.join(work, name, 'data'),
    LICENSE_DATABASE_URL: url,
    LICENSE_BACKUP_PATH: path.join(work, name, 'backups'),
    LICENSE_BACKUP_ENCRYPTION_KEY: KEY,
  });

  it(`a SQLite backup into a PostgreSQL database holding other data, killed ${KILLS} times: the old data or the backup's, never a mix`, async () => {
    const rng = prng(SEED);
    const source = sqliteEnv('a-source');
    ok(await runCli(['init'], { env: source }));
    await fillStore(source.LICENSE_DATABASE_URL, rng, ROWS, 'src');
    const restored = await snapshotTables(source.LICENSE_DATABASE_URL);
    const backup = ok(await runCli(['backup', 'create', '--json'], { env: source })).json();

    // The old data is built once in a template database; each reset copies it anew.
    const templateUrl = await createTestDatabase();
    ok(await runCli(['init'], { env: postgresEnv('a-template', templateUrl) }));
    await fillStore(templateUrl, rng, ROWS, 'old');
    const old = await snapshotTables(templateUrl);
    const template = new URL(templateUrl).pathname.slice(1);
    const live = `${template}_live`;
    const liveUrl = new URL(templateUrl);
    liveUrl.pathname = `/${live}`;
    const target: Target = {
      env: postgresEnv('a-target', liveUrl.toString()),
      stagingParent: path.join(work, 'a-target', 'backups'),
      snapshot: () => snapshotTables(liveUrl.toString()),
      async reset() {
        await admin(`DROP DATABASE IF EXISTS ${live} WITH (FORCE)`);
        await admin(`CREATE DATABASE ${live} TEMPLATE ${template}`);
      },
      async watchSwap() {
        // The restore drops and re-creates the tables in one transaction: this query waits
        // on its locks and answers right after the COMMIT.
        const client = new pg.Client({ connectionString: liveUrl.toString() });
        client.on('error', () => undefined);
        await client.connect();
        let swapped = false;
        let running = true;
        const loop = (async () => {
          while (running && !swapped) {
            const rows = await client.query("SELECT 1 FROM customers WHERE name LIKE 'src %' LIMIT 1").then((result) => result.rows, () => []);
            swapped = rows.length > 0;
          }
        })();
        return {
          swapped: () => swapped,
          async stop() {
            running = false;
            await client.end().catch(() => undefined);
            await loop;
          },
        };
      },
    };
    await target.reset();
    try {
      await killRepeatedly('SQLite to PostgreSQL', target, path.join(source.LICENSE_BACKUP_PATH, backup.file), old, restored, { from: 'sqlite', to: 'postgres' });
    } finally {
      await admin(`DROP DATABASE IF EXISTS ${live} WITH (FORCE)`);
    }
  });

  it(`a PostgreSQL backup into a SQLite database holding other data, killed ${KILLS} times: the old data or the backup's, never a mix`, async () => {
    const rng = prng(SEED + 1);
    const sourceUrl = await createTestDatabase();
    const source = postgresEnv('b-source', sourceUrl);
    ok(await runCli(['init'], { env: source }));
    await fillStore(sourceUrl, rng, ROWS_INTO_SQLITE, 'src');
    const restored = await snapshotTables(sourceUrl);
    const backup = ok(await runCli(['backup', 'create', '--json'], { env: source })).json();

    const env = sqliteEnv('b-target');
    ok(await runCli(['init'], { env }));
    await fillStore(env.LICENSE_DATABASE_URL, rng, ROWS_INTO_SQLITE, 'old');
    const old = await snapshotTables(env.LICENSE_DATABASE_URL);
    const database = env.LICENSE_DATABASE_URL;
    assert.ok(!existsSync(`${database}-wal`), 'closed cleanly: the file alone is the old data');
    const copy = path.join(work, 'b-old.db');
    copyFileSync(database, copy);
    const target: Target = {
      env,
      stagingParent: path.dirname(database),
      snapshot: () => snapshotTables(database),
      async reset() {
        rmSync(`${database}-wal`, { force: true });
        rmSync(`${database}-shm`, { force: true });
        mkdirSync(path.dirname(database), { recursive: true });
        copyFileSync(copy, database);
      },
      async watchSwap() {
        // The restore renames the converted file over the database: a new inode.
        const inode = statSync(database).ino;
        return { swapped: () => statSync(database, { throwIfNoEntry: false })?.ino !== inode, stop: async () => undefined };
      },
    };
    await killRepeatedly('PostgreSQL to SQLite', target, path.join(source.LICENSE_BACKUP_PATH, backup.file), old, restored, { from: 'postgres', to: 'sqlite' });
  });
});
