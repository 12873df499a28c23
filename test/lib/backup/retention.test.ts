import assert from 'node:assert/strict';
import { isoWeek, planRetention, type RetentionPolicy } from '../../../src/lib/backup/retention.js';
import type { BackupRecord } from '../../../src/lib/backup/repository.js';

const DAY = 86_400_000;
const now = new Date('2026-11-22T12:00:00Z');

function backup(daysAgo: number, hour = 2): BackupRecord {
  const created = new Date(now.getTime() - daysAgo * DAY);
  created.setUTCHours(hour, 0, 0, 0);
  const id = `${created.toISOString().replace(/[-:.]/g, '')}-${String(daysAgo).padStart(6, '0')}`;
  return { backup_id: id, created_at: created.toISOString() } as BackupRecord;
}

const ids = (records: readonly BackupRecord[]) => records.map((record) => record.backup_id);

describe('retention', () => {
  it('keeps the spec\'s recommendation with the defaults: daily for 7 days, weekly for about 30, monthly for about 90', () => {
    const daily = Array.from({ length: 200 }, (_, day) => backup(day));
    const policy: RetentionPolicy = { retentionDays: 1, keepDaily: 7, keepWeekly: 4, keepMonthly: 3 };
    const plan = planRetention(daily, policy, now);
    const keptAges = plan.keep.map(({ backup: record }) => Math.round((now.getTime() - Date.parse(record.created_at)) / DAY)).sort((a, b) => a - b);
    assert.deepEqual(keptAges.slice(0, 7), [0, 1, 2, 3, 4, 5, 6], 'the last 7 days');
    assert.ok(keptAges.some((age) => age > 20 && age <= 31), 'a weekly one about 3-4 weeks back');
    assert.ok(keptAges.some((age) => age > 50 && age <= 92), 'a monthly one 2-3 months back');
    assert.ok(keptAges.every((age) => age <= 92), `nothing older than ~3 months: ${keptAges}`);
    assert.equal(plan.keep.length + plan.remove.length, 200);
  });

  it('keeps everything younger than retention_days, and always the newest', () => {
    const records = [backup(1), backup(5), backup(40), backup(400)];
    const plan = planRetention(records, { retentionDays: 10, keepDaily: 0, keepWeekly: 0, keepMonthly: 0 }, now);
    assert.deepEqual(ids(plan.remove), ids([backup(40), backup(400)]));
    const lonely = planRetention([backup(400)], { retentionDays: 1, keepDaily: 0, keepWeekly: 0, keepMonthly: 0 }, now);
    assert.deepEqual(lonely.remove, [], 'the newest (and only) backup stays');
  });

  it('keeps the newest backup of a day, not every backup of it', () => {
    const plan = planRetention([backup(3, 1), backup(3, 2), backup(3, 3)], { retentionDays: 1, keepDaily: 7, keepWeekly: 0, keepMonthly: 0 }, now);
    assert.deepEqual(ids(plan.keep.map((k) => k.backup)), ids([backup(3, 3)]));
  });

  it('numbers ISO weeks across year ends', () => {
    assert.equal(isoWeek(new Date('2026-11-22T00:00:00Z')), '2026-W47');
    assert.equal(isoWeek(new Date('2021-01-03T00:00:00Z')), '2020-W53');
    assert.equal(isoWeek(new Date('2024-12-30T00:00:00Z')), '2025-W01');
  });
});
