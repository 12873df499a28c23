import type { SigningKeyChange } from '../lib/backup/signing-key-carry.js';

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
