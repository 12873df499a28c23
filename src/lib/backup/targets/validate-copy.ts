import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ResolvedConfig } from '../../config/resolve.js';
import { isPostgresUrl } from '../../storage/open.js';
import type { BackupRecord } from '../repository.js';
import { validateBackup, type BackupValidation } from '../validate.js';
import { fetchBackup } from './copy.js';
import { openTarget, selectTargets } from './open.js';

/**
 * `backup validate ID --target T` and its API form: the copy on the target is downloaded into
 * a directory of its own under the system's temporary directory (checked against the
 * target's index on the way), validated with every check of a local validate, and removed.
 */
export async function validateTargetCopy(options: {
  readonly config: ResolvedConfig;
  readonly target: string;
  readonly id: string;
  readonly onDownload?: (bytes: number) => void;
  readonly onProgress?: (bytes: number) => void;
}): Promise<{ readonly record: BackupRecord; readonly report: BackupValidation }> {
  const { config } = options;
  const [settings] = selectTargets(config.settings.backup.targets, [options.target]);
  const scratch = await mkdtemp(path.join(tmpdir(), 'license-server-validate-'));
  try {
    const target = await openTarget(settings!, config.env);
    let record: BackupRecord;
    try {
      record = await fetchBackup(target, options.id, scratch, options.onDownload ? { onProgress: options.onDownload } : {});
    } finally {
      await target.close().catch(() => undefined);
    }
    const url = config.settings.database.url;
    const report = await validateBackup({
      directory: scratch,
      reference: options.id,
      key: config.settings.backup.encryptionKey,
      scratchDatabaseUrl: isPostgresUrl(url) ? url : undefined,
      databaseUrl: url,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    return { record, report };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
