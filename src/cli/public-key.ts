import { readFileSync } from 'node:fs';
import type { ResolvedConfig } from '../lib/config/resolve.js';
import { parseKeySet, type KeySet } from '../lib/crypto/key-set.js';
import { LicenseServerError } from '../lib/errors.js';
import { describeFsError } from '../lib/fs-errors.js';
import { loadKeySet } from '../lib/signing-keys/keys.js';
import { openExistingStore } from './store.js';

/**
 * Reads --public-key: one PEM public key, or a key set of several blocks as `signing-key
 * show --all` prints it (PUBLIC_KEY_INVALID, naming the block, for anything else).
 */
export function readPublicKeyFile(file: string): KeySet {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (error) {
    throw new LicenseServerError('FILE_UNREADABLE', `cannot read the public key ${file}: ${describeFsError(error)}`);
  }
  return parseKeySet(pem, file);
}

/**
 * The server's key set (active and verify-only keys) from its store, for commands that
 * verify without --public-key.
 * The store must exist (DATABASE_NOT_FOUND otherwise): verifying against a store started
 * by accident in the wrong directory would only ever say "signature invalid". Undefined
 * when the store has no signing key yet.
 */
export async function storedPublicKey(config: ResolvedConfig): Promise<KeySet | undefined> {
  let db: Awaited<ReturnType<typeof openExistingStore>>;
  try {
    db = await openExistingStore(config);
  } catch (error) {
    if (!(error instanceof LicenseServerError) || error.code !== 'DATABASE_NOT_FOUND') throw error;
    throw new LicenseServerError('DATABASE_NOT_FOUND', error.message, {
      hint: 'Pass --public-key with the server\'s PEM (`license-server signing-key show` prints it), or point at the server\'s store with --data-dir, --database-url or --config.',
    });
  }
  try {
    const keys = await loadKeySet(db);
    return keys.length > 0 ? keys : undefined;
  } finally {
    await db.close();
  }
}

export function readLicenseFileArgument(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new LicenseServerError('FILE_UNREADABLE', `cannot read the license file ${file}: ${describeFsError(error)}`);
  }
}
