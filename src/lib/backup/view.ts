import type { Keyset } from '../cursor.js';
import { pageOf, type ListPage, type Page } from '../paging.js';

/**
 * A backup as commands and the admin API show it: `id` first, as every record names itself,
 * then its fields, `backup_id` among them. `backup_id` is the same value, kept (deprecated)
 * for the scripts and pages written against it; the index files and the manifest keep it as
 * their own field (docs/backup-format.md).
 */
export function backupView<T extends { readonly backup_id: string }>(backup: T): { readonly id: string } & T {
  return { id: backup.backup_id, ...backup };
}

/** Backups are listed newest first by id (which begins with the time it was made), one page at a time. */
export const BACKUP_KEYSET: Keyset = { list: 'backups', keys: [{ column: 'backup_id', field: 'backup_id', kind: 'text' }], descending: true };

/** One page of backups as listBackups sorts them; the cursor names the last one shown. */
export function pageBackups<T extends { readonly backup_id: string }>(records: readonly T[], page: Page = {}): ListPage<{ readonly id: string } & T> {
  const result = pageOf(records, BACKUP_KEYSET, {}, page);
  return { items: result.items.map(backupView), next_cursor: result.next_cursor };
}
