/**
 * A backup as commands and the admin API show it: `id` first, as every record names itself,
 * then its fields, `backup_id` among them. `backup_id` is the same value, kept (deprecated)
 * for the scripts and pages written against it; the index files and the manifest keep it as
 * their own field (docs/backup-format.md).
 */
export function backupView<T extends { readonly backup_id: string }>(backup: T): { readonly id: string } & T {
  return { id: backup.backup_id, ...backup };
}
