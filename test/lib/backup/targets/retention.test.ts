import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { indexName, indexText, type BackupRecord } from '../../../../src/lib/backup/repository.js';
import { listTargetBackups, pruneTarget } from '../../../../src/lib/backup/targets/copy.js';
import { openFileTarget } from '../../../../src/lib/backup/targets/file.js';
import { targetRetention, type TargetSettings } from '../../../../src/lib/backup/targets/settings.js';
import type { BackupTarget } from '../../../../src/lib/backup/targets/target.js';

const DAY = 86_400_000;

async function place(target: BackupTarget, createdAt: Date, tag: string): Promise<BackupRecord> {
  const id = `${createdAt.toISOString().replace(/[-:.]/g, '')}-${tag}`;
  const archive = Buffer.from(`archive ${id}`);
  const record: BackupRecord = {
    backup_id: id, created_at: createdAt.toISOString(), trigger: 'scheduled', engine: 'sqlite', schema_version: 9, encrypted: true,
    tool_version: '0.1.0', file: `${id}.backup.tar.gz.enc`, size: archive.length, sha256: 'ab'.repeat(32), verified_at: createdAt.toISOString(),
  };
  await target.put(record.file, () => Readable.from([archive]), archive.length);
  const index = Buffer.from(indexText(record));
  await target.put(indexName(id), () => Readable.from([index]), index.length);
  return record;
}

describe('a target\'s own retention', () => {
  let directory: string;
  beforeEach(() => {
    directory = mkdtempSync(path.join(tmpdir(), 'license-target-retention-'));
  });
  afterEach(() => rmSync(directory, { recursive: true, force: true }));

  it('keeps what its rules keep (the local ones where it sets none), the newest always, and removes the rest index first', async () => {
    const target = openFileTarget({ name: 'nas', directory });
    const at = new Date('2026-11-26T12:00:00.000Z');
    const made = [];
    for (let day = 9; day >= 0; day -= 1) made.push(await place(target, new Date(at.getTime() - day * DAY - 3600_000), ['aaaaaa', 'bbbbbb', 'cccccc', 'dddddd', 'eeeeee', 'ffffff', '111111', '222222', '333333', '444444'][day]!));
    const settings = { name: 'nas', kind: 'file', path: directory, allowUnencrypted: false, timeoutSeconds: 30, retention: { keepDaily: 3 } } as TargetSettings;
    const policy = targetRetention(settings, { retentionDays: 1, keepDaily: 7, keepWeekly: 0, keepMonthly: 0 });
    assert.deepEqual(policy, { retentionDays: 1, keepDaily: 3, keepWeekly: 0, keepMonthly: 0 });
    const plan = await pruneTarget(target, policy, at);
    const kept = (await listTargetBackups(target)).map((backup) => backup.backup_id);
    assert.deepEqual(kept, made.slice(-3).map((backup) => backup.backup_id).reverse());
    assert.deepEqual(plan.remove.map((backup) => backup.backup_id).sort(), made.slice(0, -3).map((backup) => backup.backup_id).sort());
    assert.equal(readdirSync(directory).length, 6, 'nothing left of the removed ones');
  });

  it('never removes the newest copy, however old', async () => {
    const target = openFileTarget({ name: 'nas', directory });
    const at = new Date('2026-11-26T12:00:00.000Z');
    const old = await place(target, new Date(at.getTime() - 400 * DAY), 'abcdef');
    const plan = await pruneTarget(target, { retentionDays: 1, keepDaily: 0, keepWeekly: 0, keepMonthly: 0 }, at);
    assert.deepEqual(plan.remove, []);
    assert.deepEqual((await listTargetBackups(target)).map((backup) => backup.backup_id), [old.backup_id]);
  });
});
