import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { renderReport } from '../../cli/report.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { DrillPart, DrillRecord } from '../../lib/backup/drill.js';

export default class BackupDrill extends BaseCommand<typeof BackupDrill> {
  static override description = `Prove that a restore would work, without touching the store that serves: restore the newest backup in backup.path and, with backup.replication, each replica's latest state into scratch places, and check each as a restore needs it.
The checks: the archive (every chunk and checksum) or Litestream's restore, SQLite integrity_check and the schema, every row of the live store made by the moment the copy must hold present (a backup's creation less 5 s; for a replica, its newest WAL segment less 2 s, and no earlier than now less the replication stall threshold), the live signing keys present with the same public keys, and a customer, license and bound .lic made in the scratch copy, the .lic verifying against the restored and the live keys. The result is recorded beside the backups (drill-history.json; the daemon's metrics read it) and a failure raises backup.drill_failed. serve runs it on backup.drill.schedule. Exits 0 when every part passes, 18 (RESTORE_DRILL_FAILED) when one fails, 4 when there is nothing to drill.`;
  static override examples = ['<%= config.bin %> backup drill', '<%= config.bin %> backup drill --json'];

  async run(): Promise<DrillRecord> {
    const record = await this.withDatabase(async (db, config) => {
      const { runDrill } = await import('../../lib/backup/drill.js');
      return runDrill({ config, live: db, trigger: 'manual', context: this.operationContext(), environment: process.env, onPart: (part) => {
        // A cron job gets its one summary line, and the parts that failed.
        if (process.stdout.isTTY || !part.ok) this.say(partLines(part));
      } });
    });
    const failed = record.parts.filter((part) => !part.ok);
    if (failed.length > 0) {
      const error = new LicenseServerError('RESTORE_DRILL_FAILED', `restore drill failed on ${failed.map((part) => `${part.source} ${part.name}`).join(', ')}: ${failed[0]!.error?.message ?? 'no reason given'}`);
      if (!this.jsonEnabled()) process.stderr.write(renderReport(error, false).stderr!);
      process.exitCode = error.exitCode;
    } else {
      this.say(`restore drill passed: ${record.parts.map((part) => `${part.source} ${part.name}`).join(', ')}`);
    }
    return record;
  }
}

function partLines(part: DrillPart): string {
  const head = `${part.source} ${part.name}: ${part.ok ? 'passed' : 'FAILED'} in ${part.seconds} s${part.state_at ? `, state of ${part.state_at}` : ''}`;
  const checks = part.checks.map((check) => [check.check, check.detail] as const);
  if (part.error) checks.push(['failed', `${part.error.message} (${part.error.code})`]);
  return checks.length === 0 ? head : `${head}\n${formatRecord(checks).replace(/^/gm, '  ')}`;
}
