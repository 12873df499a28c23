import { readFileSync } from 'node:fs';
import type { ResolvedConfig } from '../lib/config/resolve.js';
import { publicKeyFromPem } from '../lib/crypto/ed25519-pem.js';
import { LicenseServerError } from '../lib/errors.js';
import { describeFsError } from '../lib/fs-errors.js';
import { findSigningKey } from '../lib/signing-keys/keys.js';
import { openExistingStore } from './store.js';

/** Reads a PEM public key file given with --public-key. */
export function readPublicKeyFile(file: string): Uint8Array {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (error) {
    throw new LicenseServerError('FILE_UNREADABLE', `cannot read the public key ${file}: ${describeFsError(error)}`);
  }
  try {
    return publicKeyFromPem(pem);
  } catch (error) {
    throw new LicenseServerError('PUBLIC_KEY_INVALID', `${file} is not an Ed25519 public key in PEM form (${(error as Error).message})`);
  }
}

/**
 * The server's public key from its store, for commands that verify without --public-key.
 * The store must exist (DATABASE_NOT_FOUND otherwise): verifying against a store started
 * by accident in the wrong directory would only ever say "signature invalid". Undefined
 * when the store has no signing key yet.
 */
export async function storedPublicKey(config: ResolvedConfig): Promise<Uint8Array | undefined> {
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
    const key = await findSigningKey(db);
    return key ? publicKeyFromPem(key.public_key_pem) : undefined;
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
