import assert from 'node:assert/strict';
import { isoWeek, planRetention, type RetentionPolicy } from '../../../src/lib/backup/retention.js';
import type { BackupRecord } from '../../../src/lib/backup/repository.js';
import { resolveConfig } from '../../../src/lib/config/resolve.js';

const DAY = 86_400_000;
const now = new Date('2026-11-22T12:00:00Z');

function backup(daysAgo: number, hour = 2): BackupRecord {
  const created = new Date(now.getTime() - daysAgo * DAY);
  created.setUTCHours(hour, 0, 0, 0);
  return record(created, daysAgo);
}

let serial = 0;
function record(created: Date, tag = serial++): BackupRecord {
  const id = `${created.toISOString().replace(/[-:.]/g, '')}-${(tag % 0xffffff).toString(16).padStart(6, '0')}`;
  return { backup_id: id, created_at: created.toISOString() } as BackupRecord;
}

const ids = (records: readonly BackupRecord[]) => records.map((r) => r.backup_id);
const ageInDays = (r: BackupRecord, at: Date) => (at.getTime() - Date.parse(r.created_at)) / DAY;
const monthOf = (r: BackupRecord) => r.created_at.slice(0, 7);

/** A deterministic stream of numbers in [0, 1), so an irregular timeline is the same on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** Backup times, oldest first, ending at `end`: the schedules an operator might run. */
const SCHEDULES: Record<string, (end: Date) => Date[]> = {
  'every 3 days, 40 backups over 120 days': (end) => Array.from({ length: 40 }, (_, i) => new Date(end.getTime() - (39 - i) * 3 * DAY)),
  'daily for 400 days': (end) => Array.from({ length: 400 }, (_, i) => new Date(end.getTime() - (399 - i) * DAY)),
  'every 6 hours for 100 days': (end) => Array.from({ length: 400 }, (_, i) => new Date(end.getTime() - (399 - i) * DAY / 4)),
  'weekly for two years': (end) => Array.from({ length: 105 }, (_, i) => new Date(end.getTime() - (104 - i) * 7 * DAY)),
  'daily for 300 days, with 5 missed days and a 3-week gap': (end) =>
    Array.from({ length: 300 }, (_, i) => 299 - i)
      .filter((daysAgo) => !(daysAgo >= 10 && daysAgo < 15) && !(daysAgo >= 80 && daysAgo < 101))
      .map((daysAgo) => new Date(end.getTime() - daysAgo * DAY)),
  'daily for 200 days, then nothing for 6 weeks': (end) => Array.from({ length: 200 }, (_, i) => new Date(end.getTime() - (241 - i) * DAY)),
  'irregular, from an hour to 12 days apart, over a year': (end) => {
    const random = seeded(20261122);
    const times = [end];
    while (end.getTime() - times[times.length - 1]!.getTime() < 370 * DAY) times.push(new Date(times[times.length - 1]!.getTime() - (DAY / 24 + random() * 12 * DAY)));
    return times.reverse();
  },
  'a young history: daily for 95 days': (end) => Array.from({ length: 95 }, (_, i) => new Date(end.getTime() - (94 - i) * DAY)),
};

/** Where the last backup falls: month and year ends, a leap day, and the shortest three months behind. */
const ENDS = [
  '2026-11-22T12:00:00Z',
  '2027-01-02T02:00:00Z',
  '2026-12-31T23:30:00Z',
  '2028-03-01T02:00:00Z',
  '2027-03-01T02:00:00Z',
  '2027-05-01T00:30:00Z',
  '2028-02-29T02:00:00Z',
];

describe('retention', () => {
  let defaults: RetentionPolicy;
  before(async () => {
    defaults = (await resolveConfig({ env: {}, cwd: '/nonexistent' })).settings.backup;
  });

  for (const [schedule, times] of Object.entries(SCHEDULES)) {
    it(`with the defaults keeps the spec's recommendation on "${schedule}": every backup for 30 days, each month's last for 120, one at least 90 days old`, () => {
      for (const end of ENDS) {
        const made: BackupRecord[] = [];
        let kept: BackupRecord[] = [];
        // Retention runs after every backup, on what the previous runs left.
        for (const at of times(new Date(end))) {
          const made1 = record(at);
          made.push(made1);
          kept = planRetention([...kept, made1], defaults, at).keep.map((k) => k.backup);
          const keptIds = new Set(ids(kept));
          const where = `ending ${end}, at ${at.toISOString()}`;
          for (const b of made) {
            if (ageInDays(b, at) < 30) assert.ok(keptIds.has(b.backup_id), `${where}: ${b.created_at} is younger than 30 days and was removed`);
          }
          const lastOfMonth = new Map<string, BackupRecord>();
          for (const b of made) lastOfMonth.set(monthOf(b), b);
          for (const [month, b] of lastOfMonth) {
            if (ageInDays(b, at) < 120) assert.ok(keptIds.has(b.backup_id), `${where}: the last backup of ${month} (${b.created_at}) was removed before it was 120 days old`);
          }
          if (made.some((b) => ageInDays(b, at) >= 90)) {
            const oldest = Math.max(...kept.map((b) => ageInDays(b, at)));
            assert.ok(oldest >= 90, `${where}: backups 90 days old were made, but the oldest kept is ${oldest.toFixed(1)} days old`);
          }
          const young = made.filter((b) => ageInDays(b, at) <= defaults.retentionDays).length;
          const bound = young + defaults.keepDaily + defaults.keepWeekly + defaults.keepMonthly + 3;
          assert.ok(kept.length <= bound, `${where}: ${kept.length} kept, more than the rules allow (${bound})`);
        }
        if (made.length > 0 && ageInDays(made[0]!, new Date(end)) > 250) {
          const oldest = Math.max(...kept.map((b) => ageInDays(b, new Date(end))));
          assert.ok(oldest <= 6 * 31 + 1, `ending ${end}: the history is pruned, not kept whole (oldest kept ${oldest.toFixed(1)} days)`);
        }
      }
    });
  }

  it('keeps everything younger than retention_days, and always the newest', () => {
    const records = [backup(1), backup(5), backup(40), backup(400)];
    const plan = planRetention(records, { retentionDays: 10, keepDaily: 0, keepWeekly: 0, keepMonthly: 0 }, now);
    assert.deepEqual(ids(plan.remove), ids([backup(40), backup(400)]));
    const lonely = planRetention([backup(400)], { retentionDays: 1, keepDaily: 0, keepWeekly: 0, keepMonthly: 0 }, now);
    assert.deepEqual(lonely.remove, [], 'the newest (and only) backup stays');
  });

  it('keeps the newest backup of a day, not every backup of it', () => {
    const plan = planRetention([backup(3, 1), backup(3, 2), backup(3, 3)], { retentionDays: 1, keepDaily: 1, keepWeekly: 0, keepMonthly: 0 }, now);
    assert.deepEqual(ids(plan.keep.map((k) => k.backup)), ids([backup(3, 3)]));
  });

  it('keeps the newest backup of each of the last N periods that have one, skipping periods without one', () => {
    const records = [backup(0), backup(1), backup(10), backup(40), backup(41), backup(100), backup(200), backup(300)];
    const plan = planRetention(records, { retentionDays: 1, keepDaily: 3, keepWeekly: 0, keepMonthly: 0 }, now);
    assert.deepEqual(ids(plan.keep.map((k) => k.backup)), ids([backup(0), backup(1), backup(10)]), 'days 0, 1 and 10: three days found, so no oldest is added');
  });

  it('keeps the oldest backup too while a rule finds fewer periods than it asks for (as borg does)', () => {
    const records = [backup(0), backup(35), backup(70), backup(95)];
    const plan = planRetention(records, { retentionDays: 1, keepDaily: 0, keepWeekly: 0, keepMonthly: 6 }, now);
    assert.deepEqual(ids(plan.remove), [], 'four months have a backup, fewer than 6: all are kept, the oldest as such');
    assert.ok(plan.keep.find((k) => k.backup.backup_id === backup(95).backup_id)!.reasons.some((reason) => /oldest/.test(reason)));
    const enough = planRetention(records, { retentionDays: 1, keepDaily: 0, keepWeekly: 0, keepMonthly: 2 }, now);
    assert.deepEqual(ids(enough.remove), ids([backup(70), backup(95)]), 'two months asked, two found: the older ones go');
  });

  it('numbers ISO weeks across year ends', () => {
    assert.equal(isoWeek(new Date('2026-11-22T00:00:00Z')), '2026-W47');
    assert.equal(isoWeek(new Date('2021-01-03T00:00:00Z')), '2020-W53');
    assert.equal(isoWeek(new Date('2024-12-30T00:00:00Z')), '2025-W01');
  });
});
