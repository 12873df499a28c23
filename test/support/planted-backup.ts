import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { indexText, type BackupRecord } from '../../src/lib/backup/repository.js';
import { copyBackup } from '../../src/lib/backup/targets/copy.js';
import type { BackupTarget } from '../../src/lib/backup/targets/target.js';

/**
 * A listed local backup of `bytes` random bytes in `directory`, made now: archive and index, as
 * `backup create` leaves them. Its bytes need not be a real backup's to be copied off-site.
 */
export function plantBackup(directory: string, bytes: number): BackupRecord {
  const at = new Date();
  const id = `${at.toISOString().replace(/[-:.]/g, '').replace(/Z$/, '')}Z-${randomBytes(3).toString('hex')}`;
  const archive = randomBytes(bytes);
  const record: BackupRecord = {
    backup_id: id, created_at: at.toISOString(), trigger: 'manual', engine: 'sqlite', schema_version: 9, encrypted: true, tool_version: '0.1.0',
    file: `${id}.backup.tar.gz.enc`, size: archive.length, sha256: createHash('sha256').update(archive).digest('hex'), verified_at: at.toISOString(),
  };
  writeFileSync(path.join(directory, record.file), archive, { mode: 0o600 });
  writeFileSync(path.join(directory, `${id}.backup.json`), indexText(record), { mode: 0o600 });
  return record;
}

/** `work`, or a rejection naming `what` once `ms` have passed. */
export async function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} within ${Math.round(ms)} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Milliseconds one whole copy of `record` from `directory` to `target` takes here, through the
 * target's own code (it must succeed); closes the target. What a test's bounds are made of.
 */
export async function timedCopy(target: BackupTarget, directory: string, record: BackupRecord): Promise<number> {
  const started = performance.now();
  try {
    assert.equal((await copyBackup(target, directory, record, { allowUnencrypted: false })).result, 'copied');
  } finally {
    await target.close();
  }
  return performance.now() - started;
}
