import { text } from 'node:stream/consumers';
import path from 'node:path';
import type { ResolvedConfig } from '../config/resolve.js';
import { LicenseServerError } from '../errors.js';
import { listSigningKeys } from '../signing-keys/keys.js';
import { openDatabase } from '../storage/open.js';
import type { Database } from '../storage/types.js';
import { readArchive } from './archive/archive.js';
import { parseManifest, type Manifest } from './archive/manifest.js';
import { resolveBackup } from './repository.js';
import { changesOf, planKeySet, type KeySummary, type SigningKeyChange } from './signing-key-carry.js';

/**
 * What a restore of a backup would do to the signing keys, told before it runs (`backup
 * restore` asks with it, and says it with --dry-run or when it refuses without --yes; the API
 * answers it to `"dry_run": true`), above all when the backup is another server's: its key
 * set and admin tokens then replace this server's.
 */
export interface RestorePreview {
  readonly backup_id: string;
  readonly created_at: string;
  readonly dry_run: true;
  /**
   * As in RestoreReport (without erase_warning), from the keys the backup's manifest lists and
   * this store's; null when the backup lists none (made by an earlier release): then only the
   * report of the restore tells.
   */
  readonly signing_keys: { readonly another_server: boolean; readonly changes: SigningKeyChange[] } | null;
}

export async function previewRestore(options: {
  readonly config: ResolvedConfig;
  readonly reference: string;
  readonly directory?: string;
  /** The store as the caller has it open (the daemon); otherwise it is opened here, if there is one. */
  readonly db?: Database;
}): Promise<RestorePreview> {
  const { settings } = options.config;
  const { file, record } = await resolveBackup(path.resolve(options.directory ?? settings.backup.path), options.reference);
  // The index of a listed backup copies its manifest; a copied file is read up to its manifest.
  const manifest: Pick<Manifest, 'backup_id' | 'created_at' | 'signing_keys'> = record ?? (await readManifest(file, settings.backup.encryptionKey));
  const current = await currentKeys(settings.database.url, options.db);
  const plan = manifest.signing_keys && current ? planKeySet(current, manifest.signing_keys) : undefined;
  return {
    backup_id: manifest.backup_id,
    created_at: manifest.created_at,
    dry_run: true,
    signing_keys: plan ? { another_server: plan.another_server, changes: changesOf(plan) } : null,
  };
}

/** The store's keys; none on a new host; undefined when they cannot be read as keys (a schema before 5). */
async function currentKeys(url: string, open: Database | undefined): Promise<KeySummary[] | undefined> {
  let db = open;
  if (!db) {
    try {
      db = await openDatabase(url, { create: false, migrate: false });
    } catch (error) {
      if (!(error instanceof LicenseServerError)) throw error;
      // Not there is a new host; one that cannot be reached is for the restore itself to report.
      return error.code === 'DATABASE_NOT_FOUND' ? [] : undefined;
    }
  }
  try {
    return (await listSigningKeys(db)).map(({ key_id, state, created_at }) => ({ key_id, state, created_at }));
  } catch {
    return undefined;
  } finally {
    if (!open) await db.close();
  }
}

/** The manifest, the archive's first entry: nothing after it is read. */
async function readManifest(file: string, key: Buffer | undefined): Promise<Manifest> {
  let manifest: Manifest | undefined;
  const enough = new Error('the manifest is read');
  try {
    await readArchive(file, { key }, async (name, content) => {
      if (name !== 'manifest.json') throw new LicenseServerError('BACKUP_INVALID', 'the archive does not start with manifest.json');
      manifest = parseManifest(await text(content));
      throw enough;
    });
  } catch (error) {
    if (!manifest) throw error;
  }
  if (!manifest) throw new LicenseServerError('BACKUP_INVALID', 'the archive is empty');
  return manifest;
}
