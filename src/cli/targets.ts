import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { BackupTarget } from '../lib/backup/targets/target.js';

/** Runs `work` on the configured target `name`, closing its connections afterwards. */
export async function withTarget<T>(config: ResolvedConfig, name: string, work: (target: BackupTarget) => Promise<T>): Promise<T> {
  const [{ openTarget, selectTargets }] = await Promise.all([import('../lib/backup/targets/open.js')]);
  const [settings] = selectTargets(config.settings.backup.targets, [name]);
  const target = await openTarget(settings!, config.env);
  try {
    return await work(target);
  } finally {
    await target.close().catch(() => undefined);
  }
}
