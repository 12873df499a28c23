import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { formatBytes } from '../../cli/progress.js';
import type { BackupRecord } from '../../lib/backup/repository.js';
import { pageBackups } from '../../lib/backup/view.js';
import { withTarget } from '../../cli/targets.js';

export default class BackupList extends BaseCommand<typeof BackupList> {
  static override description = `List complete, verified backups, newest first. Reads only their index files: fast, and works while the database is down. With --target, what that off-site target holds: each index there whose archive is there with its size (an interrupted copy is never listed).
Warns on standard error (also with --json, whose output stays the list) about what interrupted runs left: unlisted archives, unfinished prunes, work directories of dead processes, and on PostgreSQL scratch databases of dead validates. It changes nothing; the next backup create, prune or validate clears them. It also names index or archive files that are not regular files (symbolic links, FIFOs), which are never listed, read or cleared.`;
  static override flags = {
    path: Flags.string({ description: 'Backup directory (default: backup.path).' }),
    target: Flags.string({ description: 'List what this off-site target (backup.targets) holds, read from the target itself.', exclusive: ['path'] }),
    ...pagingFlags,
  };

  async run(): Promise<Array<BackupRecord & { id: string }>> {
    const config = await this.resolveConfig();
    const [{ listBackups }, { findDebris }] = await Promise.all([
      import('../../lib/backup/repository.js'),
      import('../../lib/backup/locks/debris.js'),
    ]);
    const directory = this.flags.path ?? config.settings.backup.path;
    const { limit, offset, cursor } = this.flags;
    const target = this.flags.target;
    const all = target === undefined
      ? await listBackups(directory)
      : await withTarget(config, target, async (opened) => (await import('../../lib/backup/targets/copy.js')).listTargetBackups(opened));
    const { items: backups, next_cursor } = pageBackups(all, { limit, offset, cursor });
    this.say(
      formatTable(backups, [
        { header: 'ID', value: (b) => b.id },
        { header: 'CREATED', value: (b) => b.created_at },
        { header: 'SIZE', value: (b) => formatBytes(b.size) },
        { header: 'ENGINE', value: (b) => b.engine },
        { header: 'SCHEMA', value: (b) => b.schema_version },
        { header: 'ENCRYPTED', value: (b) => b.encrypted },
        { header: 'TRIGGER', value: (b) => b.trigger },
      ], '(no backups)'),
    );
    // On standard error even with --json (where warnLine is silent): a script keeps its
    // array on stdout and still sees that interrupted work needs attention.
    if (target === undefined) {
      for (const item of await findDebris({ directory, databaseUrl: config.settings.database.url })) process.stderr.write(`warning: ${item.message}\n`);
    }
    this.sayNextPage(next_cursor);
    return backups;
  }
}
