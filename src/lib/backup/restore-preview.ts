import { stat } from 'node:fs/promises';
import { text } from 'node:stream/consumers';
import path from 'node:path';
import type { ResolvedConfig } from '../config/resolve.js';
import { LicenseServerError } from '../errors.js';
import type { Database } from '../storage/types.js';
import { readArchive } from './archive/archive.js';
import { parseManifest, type Manifest } from './archive/manifest.js';
import { verifyArchive } from './archive/verify.js';
import { resolveBackup } from './repository.js';
import { checkCompatible, currentKeySummaries } from './restore-checks.js';
import { openRestoreSource } from './restore-source.js';
import { changesOf, planKeySet, type SigningKeyChange } from './signing-key-carry.js';

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

export interface PreviewOptions {
  readonly config: ResolvedConfig;
  readonly reference: string;
  readonly directory?: string;
  /** A name under backup.targets: the backup there, downloaded into a staging area and removed again. */
  readonly target?: string;
  /** The store as the caller has it open (the daemon); otherwise it is opened here, if there is one. */
  readonly db?: Database;
  /** As restoreBackup's: the download from a target, then the read of the archive. */
  readonly onPhase?: (phase: 'download' | 'validate', totalBytes?: number) => void;
  readonly onProgress?: (bytes: number) => void;
}

/**
 * The dry run: a rehearsal of everything the restore checks before it replaces anything, so
 * that it fails where the restore would, and changes nothing. The archive is read whole as the
 * restore reads it (a download from a target first, refused unencrypted unless the target
 * allows it; every chunk's tag, so a missing or wrong key; every entry's checksum; the index's
 * size and SHA-256; a schema newer than this release), then what it would do to the signing
 * keys is told from the manifest it verified. Not rehearsed: the database's own checks and
 * load, a conversion to the other engine, and daemons using the database.
 */
export async function previewRestore(options: PreviewOptions): Promise<RestorePreview> {
  const { settings } = options.config;
  const source = await openRestoreSource({
    config: options.config,
    reference: options.reference,
    directory: path.resolve(options.directory ?? settings.backup.path),
    ...(options.target === undefined ? {} : { target: options.target }),
    onDownload: (size) => options.onPhase?.('download', size),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  });
  let manifest: Manifest;
  try {
    options.onPhase?.('validate', (await stat(source.file)).size);
    ({ manifest } = await verifyArchive(source.file, {
      key: settings.backup.encryptionKey,
      expected: source.record,
      onProgress: options.onProgress,
      onManifest: async (read) => {
        checkCompatible(read);
        return undefined;
      },
    }));
  } finally {
    await source.dispose();
  }
  return describe(manifest, await currentKeySummaries(settings.database.url, options.db));
}

/**
 * What `backup restore` says in its question (and its refusal without --yes), before the
 * restore itself checks everything: from the backup's index (the target's, for a backup on a
 * target, read without downloading the archive), or for a file named by path its manifest.
 * Only words for the operator: the restore decides from the data.
 */
export async function describeRestore(options: PreviewOptions): Promise<RestorePreview> {
  const { settings } = options.config;
  let manifest: Pick<Manifest, 'backup_id' | 'created_at' | 'signing_keys'>;
  if (options.target !== undefined) {
    const [{ findTargetBackup }, { openTarget, selectTargets }] = await Promise.all([import('./targets/copy.js'), import('./targets/open.js')]);
    const [target] = selectTargets(settings.backup.targets, [options.target]);
    const opened = await openTarget(target!, options.config.env);
    try {
      manifest = await findTargetBackup(opened, options.reference);
    } finally {
      await opened.close().catch(() => undefined);
    }
  } else {
    const { file, record } = await resolveBackup(path.resolve(options.directory ?? settings.backup.path), options.reference);
    manifest = record ?? (await readManifest(file, settings.backup.encryptionKey));
  }
  return describe(manifest, await currentKeySummaries(settings.database.url, options.db));
}

function describe(manifest: Pick<Manifest, 'backup_id' | 'created_at' | 'signing_keys'>, current: Awaited<ReturnType<typeof currentKeySummaries>>): RestorePreview {
  const plan = manifest.signing_keys && current ? planKeySet(current, manifest.signing_keys) : undefined;
  return {
    backup_id: manifest.backup_id,
    created_at: manifest.created_at,
    dry_run: true,
    signing_keys: plan ? { another_server: plan.another_server, changes: changesOf(plan) } : null,
  };
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
