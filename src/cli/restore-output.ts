import type { RestoreReport } from '../lib/backup/restore.js';
import type { RestorePreview } from '../lib/backup/restore-preview.js';
import type { SigningKeyChange } from '../lib/backup/signing-key-carry.js';

/** A line of `backup restore`'s human output: on standard output, or a warning on standard error. */
export interface OutputLine {
  readonly text: string;
  readonly warning?: true;
}

const ENGINE_NAMES = { sqlite: 'SQLite', postgres: 'PostgreSQL' } as const;

/** What restoring another server's backup does, before (`would replace`) or after (`replaced`). */
export function anotherServer(backupId: string, tense: 'would replace' | 'replaced'): string {
  return `backup ${backupId} is another server's (it shares no signing key with this one): its signing keys and admin tokens ${tense} this server's`;
}

/** One line per signing key whose state a restore changes (docs/backup-format.md, "What a restore keeps"). */
export function describeKeyChanges(changes: readonly SigningKeyChange[]): string[] {
  return changes.map(({ key_id: id, before, backup, after }) => {
    const now = after === null ? 'removed from the key set' : after;
    return `signing key ${id}: ${now} (before the restore: ${before ?? 'not in the store'}; in the backup: ${backup ?? 'not in it'})`;
  });
}

export function reportLines(report: RestoreReport): OutputLine[] {
  const lines: OutputLine[] = [];
  const say = (text: string) => lines.push({ text });
  const warn = (text: string) => lines.push({ text, warning: true });
  const migrated = report.migrated_to !== report.schema_version ? `, migrated from schema ${report.schema_version} to ${report.migrated_to}` : '';
  const safety = report.pre_restore_backup_id ? `; the previous state is backup ${report.pre_restore_backup_id}` : '';
  say(`restored backup ${report.backup_id} (${report.engine}${migrated})${safety}`);
  if (report.moved) {
    const rows = Object.values(report.moved.rows).reduce((sum, n) => sum + n, 0);
    say(`moved from ${ENGINE_NAMES[report.moved.from]} to ${ENGINE_NAMES[report.moved.to]}: ${Object.keys(report.moved.rows).length} tables, ${rows} rows; database.url is unchanged`);
  }
  const keys = report.signing_keys;
  if (keys.another_server) warn(anotherServer(report.backup_id, 'replaced'));
  for (const line of describeKeyChanges(keys.changes)) say(line);
  if (keys.erase_warning) warn(keys.erase_warning);
  if (report.signing_key_warning) warn(`${report.signing_key_warning}; set signing.key_encryption_key to the key-encryption key the backup's keys were sealed with`);
  if (report.replaced_config) say(`configuration restored; the replaced file is kept as ${report.replaced_config}`);
  const { admin_tokens: tokens, licenses, customers, machines, keep } = report.revocations;
  for (const token of tokens) say(`kept revoked: admin token "${token.name}" (${token.prefix}), revoked ${token.revoked_at}`);
  const state = keep ? 'kept deactivated' : 'active again, as in the backup (--no-keep-revocations)';
  for (const license of licenses) say(`${state}: license ${license.id} (${license.key_prefix})`);
  for (const customer of customers) say(`${state}: customer ${customer.id} (${customer.name})`);
  for (const machine of machines) say(`${state}: machine ${machine.id} (${machine.hardware_id}) of license ${machine.license_id}`);
  return lines;
}

export function previewLines(preview: RestorePreview): OutputLine[] {
  const lines: OutputLine[] = [{ text: `dry run, nothing changed: backup ${preview.backup_id} (made ${preview.created_at})` }];
  const keys = preview.signing_keys;
  if (!keys) return [...lines, { text: 'the backup does not list its signing keys (an earlier release made it): the report of the restore names the keys it changes' }];
  if (keys.another_server) lines.push({ text: anotherServer(preview.backup_id, 'would replace'), warning: true });
  for (const line of describeKeyChanges(keys.changes)) lines.push({ text: `would be ${line}` });
  if (keys.changes.length === 0) lines.push({ text: 'no signing key would change' });
  return lines;
}

/** For the question and the refusal without --yes: what --yes would replace, or undefined for a backup of this server. */
export function anotherServerWarning(preview: RestorePreview): string | undefined {
  return preview.signing_keys?.another_server ? anotherServer(preview.backup_id, 'would replace') : undefined;
}
