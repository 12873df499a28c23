import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createBackup } from '../../../src/lib/backup/create.js';
import { listBackups } from '../../../src/lib/backup/repository.js';
import { pruneBackups } from '../../../src/lib/backup/retention.js';
import { BackupScheduler, type SchedulerClock } from '../../../src/lib/backup/scheduler.js';
import { resolveConfig } from '../../../src/lib/config/resolve.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { FakeClock, NODE_MAX_TIMER_DELAY_MS } from '../../support/fake-clock.js';
import { forEachEngine } from '../../support/engines.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

forEachEngine('backup scheduler (injected clock)', (fixture) => {
  let work: string;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-scheduler-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  async function daemon(url: string, directory: string, clock: FakeClock, env: Record<string, string> = {}) {
    const db = await openDatabase(url);
    const config = await resolveConfig({ env: { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: directory, ...env }, cwd: work });
    const context = { actor: 'scheduler', clock: () => clock.now() };
    const results: string[] = [];
    const scheduler = new BackupScheduler({
      expression: '0 * * * *',
      database: () => db,
      run: async () => {
        const record = await createBackup({ db, config, trigger: 'scheduled', toolVersion: 'test', context });
        await pruneBackups({ directory, policy: config.settings.backup, context, db, databaseUrl: url });
        return record;
      },
      newestBackup: async () => {
        const [newest] = await listBackups(directory);
        return newest ? new Date(newest.created_at) : undefined;
      },
      clock,
      onResult: (run) => results.push(run.status),
    });
    return { db, scheduler, results, directory };
  }

  async function rows(db: Database) {
    return db.query<{ slot: string; status: string }>('SELECT slot, status FROM backup_runs ORDER BY slot');
  }

  it('catches a missed slot up once at start, then runs on the schedule and reports its state', async () => {
    const url = await fixture.freshUrl();
    const clock = new FakeClock(new Date('2026-11-22T10:30:00Z'));
    const first = await daemon(url, path.join(work, 'a'), clock);
    try {
      await first.scheduler.start();
      assert.equal((await listBackups(first.directory)).length, 1, 'the missed 10:00 slot ran at start');
      const status = await first.scheduler.status();
      assert.equal(status.next_run, '2026-11-22T11:00:00.000Z');
      assert.equal(status.last_run?.status, 'succeeded');
      assert.equal(status.last_run?.slot, '2026-11-22T10:00:00.000Z');
      clock.advance(30 * 60_000);
      await first.scheduler.idle();
      assert.equal((await listBackups(first.directory)).length, 2, 'the 11:00 slot ran');
      assert.deepEqual((await rows(first.db)).map((r) => r.status), ['succeeded', 'succeeded']);
      first.scheduler.stop();

      clock.advance(5 * 60_000);
      const restarted = await daemon(url, first.directory, clock);
      await restarted.scheduler.start();
      assert.equal((await listBackups(first.directory)).length, 2, 'no second catch-up after a restart');
      restarted.scheduler.stop();
      await restarted.db.close();
    } finally {
      first.scheduler.stop();
      await first.db.close();
    }
  });

  it('runs each slot exactly once between two daemons on one database', async () => {
    const url = await fixture.freshUrl();
    const clock = new FakeClock(new Date('2026-11-22T10:30:00Z'));
    const a = await daemon(url, path.join(work, 'two-a'), clock);
    const b = await daemon(url, path.join(work, 'two-b'), clock);
    try {
      await Promise.all([a.scheduler.start(), b.scheduler.start()]);
      for (let hour = 0; hour < 3; hour += 1) {
        clock.advance(HOUR);
        await Promise.all([a.scheduler.idle(), b.scheduler.idle()]);
      }
      const made = (await listBackups(a.directory)).length + (await listBackups(b.directory)).length;
      assert.equal(made, 4, 'the catch-up and three slots, once each');
      assert.deepEqual((await rows(a.db)).map((r) => r.status), ['succeeded', 'succeeded', 'succeeded', 'succeeded']);
      assert.equal(a.results.length + b.results.length, 4);
    } finally {
      a.scheduler.stop();
      b.scheduler.stop();
      await a.db.close();
      await b.db.close();
    }
  });

  // A yearly slot is months away: more than setTimeout holds (2^31-1 ms, about 24.8 days).
  function yearly(db: Database, clock: SchedulerClock, slots: string[]) {
    return new BackupScheduler({
      expression: '0 3 1 1 *',
      database: () => db,
      run: async (slot) => {
        slots.push(slot.toISOString());
        return { backup_id: `backup-${slots.length}` };
      },
      newestBackup: async () => clock.now(),
      clock,
    });
  }

  it('waits for a yearly slot in timers of at most 2^31-1 ms and runs it once, at its time', async () => {
    const db = await fixture.freshDatabase();
    const clock = new FakeClock(new Date('2026-03-01T12:00:00Z'));
    const slots: string[] = [];
    const scheduler = yearly(db, clock, slots);
    try {
      await scheduler.start();
      const next = Date.parse((await scheduler.status()).next_run!);
      assert.ok(next - clock.now().getTime() > 300 * DAY, 'the next slot is next January');
      clock.advance(next - clock.now().getTime() - 1000);
      await scheduler.idle();
      assert.deepEqual(slots, [], 'nothing ran before the slot');
      clock.advance(1000);
      await scheduler.idle();
      assert.deepEqual(slots, [new Date(next).toISOString()], 'the slot ran once, at its time');
      assert.deepEqual(clock.overflows, [], 'no timer longer than Node holds');
      assert.ok(clock.pending().every((ms) => ms <= NODE_MAX_TIMER_DELAY_MS));
    } finally {
      scheduler.stop();
    }
  });

  it('on the real clock, a yearly schedule runs nothing early and emits no TimeoutOverflowWarning', async () => {
    const db = await fixture.freshDatabase();
    const warnings: string[] = [];
    const listener = (warning: Error) => warning.name === 'TimeoutOverflowWarning' && warnings.push(warning.message);
    process.on('warning', listener);
    const slots: string[] = [];
    const realClock: SchedulerClock = { now: () => new Date(), setTimeout: (callback, ms) => setTimeout(callback, ms), clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout) };
    const scheduler = yearly(db, realClock, slots);
    try {
      await scheduler.start();
      // An overflowing timer would have fired within a millisecond, and again after each run.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      assert.deepEqual(slots, []);
      assert.deepEqual(warnings, []);
    } finally {
      scheduler.stop();
      process.off('warning', listener);
    }
  });

  it('applies retention after a scheduled backup, and records a failed run', async () => {
    const url = await fixture.freshUrl();
    const directory = path.join(work, 'retention');
    const clock = new FakeClock(new Date('2026-11-22T10:30:00Z'));
    const old = await daemon(url, directory, clock);
    const config = await resolveConfig({ env: { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: directory }, cwd: work });
    for (const daysAgo of [90, 60, 45]) {
      await createBackup({ db: old.db, config, trigger: 'manual', toolVersion: 'test', context: { actor: 't', clock: () => new Date(clock.now().getTime() - daysAgo * 24 * HOUR) } });
    }
    await old.db.close();
    const strict = await daemon(url, directory, clock, { LICENSE_BACKUP_RETENTION_DAYS: '1', LICENSE_BACKUP_KEEP_DAILY: '0', LICENSE_BACKUP_KEEP_WEEKLY: '0', LICENSE_BACKUP_KEEP_MONTHLY: '0' });
    try {
      await strict.scheduler.start();
      const left = await listBackups(directory);
      assert.deepEqual(left.map((b) => b.trigger), ['scheduled'], 'the three old ones were pruned after the run');
    } finally {
      strict.scheduler.stop();
      await strict.db.close();
    }
    const failing = await openDatabase(url);
    try {
      const broken = new BackupScheduler({
        expression: '0 * * * *',
        database: () => failing,
        run: async () => {
          throw new Error('disk on fire');
        },
        newestBackup: async () => undefined,
        clock: new FakeClock(new Date('2026-11-22T13:30:00Z')),
      });
      await broken.start();
      const status = await broken.status();
      assert.equal(status.last_run?.status, 'failed');
      assert.equal(status.last_run?.error, 'disk on fire');
      broken.stop();
    } finally {
      await failing.close();
    }
  });
});
