import { existsSync, readFileSync } from 'node:fs';
import type { ResolvedConfig } from '../lib/config/resolve.js';
import { publicKeyFromPem } from '../lib/crypto/ed25519-pem.js';
import { LicenseServerError } from '../lib/errors.js';
import { describeFsError } from '../lib/fs-errors.js';
import { openDatabase, isPostgresUrl } from '../lib/storage/open.js';
import { findSigningKey } from '../lib/signing-key.js';

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
 * The server's public key from its database, for commands that verify without --public-key.
 * A SQLite database that does not exist is not created: this may be an air-gapped machine
 * that has only the file and the PEM.
 */
export async function storedPublicKey(config: ResolvedConfig): Promise<Uint8Array | undefined> {
  const url = config.settings.database.url;
  if (!isPostgresUrl(url) && !existsSync(url)) return undefined;
  const db = await openDatabase(url);
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
