import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import type { Database, Queryable } from '../storage/types.js';
import { loadKeyPair, signingKeyMissing } from './keys.js';

// RFC 8410 PKCS#8 wrapping of a 32-byte Ed25519 seed, so node:crypto can import the raw key.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * Signs with node:crypto, about 20 times faster here than @noble/curves, from a KeyObject
 * parsed once (parsing per call costs most of that gain). Ed25519 is deterministic, so the
 * signatures equal @noble's byte for byte; test/lib/offline/vectors.test.ts holds them to it.
 */
export class LicenseSigner {
  private constructor(
    readonly keyId: string,
    readonly publicKey: Uint8Array,
    /** Whether files this key signs carry `key_id` (keys.ts, SigningKeyPair). */
    readonly keyIdInFiles: boolean,
    private readonly key: KeyObject,
  ) {}

  static fromSecretKey(keyId: string, secretKey: Uint8Array, publicKey: Uint8Array, keyIdInFiles = true): LicenseSigner {
    const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, secretKey]), format: 'der', type: 'pkcs8' });
    return new LicenseSigner(keyId, publicKey, keyIdInFiles, key);
  }

  sign(message: Uint8Array): Uint8Array {
    return new Uint8Array(sign(null, message, this.key));
  }

  /**
   * The same signature, made on libuv's thread pool: the event loop spends about a third of
   * a signature's time on it and goes on with other requests meanwhile.
   */
  signAsync(message: Uint8Array): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      sign(null, message, this.key, (error, signature) => (error ? reject(error) : resolve(new Uint8Array(signature))));
    });
  }
}

/** Per database, the signer of the key last seen active: one parsed private key at a time. */
const signers = new WeakMap<Database, { readonly keyId: string; readonly sealedWith: string | null; readonly signer: Promise<LicenseSigner> }>();

/**
 * The signer of the store's active key. Which key is active, and how it is stored, is read
 * from the database on every call (one indexed row): a rotation by another daemon or the
 * command line takes effect on the next signature here, so daemons sharing a database
 * switch keys together. SIGNING_KEY_MISSING without a key.
 */
export async function getSigner(db: Database): Promise<LicenseSigner> {
  // TRUE, not a bound true: see ACTIVE_KEY_ID in offline/checkout-read.ts.
  const rows = await db.query('SELECT key_id, sealed_with FROM signing_keys WHERE is_current = TRUE');
  if (!rows[0]) throw signingKeyMissing();
  return signerForKey(db, String(rows[0].key_id), db, sealedWithOf(rows[0].sealed_with));
}

/**
 * The signer of `keyId`, which the caller has just read as the active key (a checkout reads
 * it with the license), stored sealed with the key-encryption key `sealedWith` (its kek id,
 * or null when unsealed). The parsed private key is kept for the database until another key
 * is seen active, and is then dropped: a key rotated away, perhaps by another daemon, is not
 * held in memory, nor parsed again while it stays active. A key whose sealing changed
 * (`signing-key protect` or `unprotect`, anywhere) is opened again, so that a process
 * signs only while it could also load the key as now stored: a daemon without the
 * key-encryption key fails with SIGNING_KEK_REQUIRED at once, not at its next start.
 * `reader` is what loads a key not cached, the caller's transaction when inside one (on
 * SQLite the database itself would wait for that transaction to end).
 */
export function signerForKey(db: Database, keyId: string, reader: Queryable = db, sealedWith: string | null = null): Promise<LicenseSigner> {
  const cached = signers.get(db);
  if (cached?.keyId === keyId && cached.sealedWith === sealedWith) return cached.signer;
  const signer = loadKeyPair(db, keyId, reader).then((pair) => {
    const loaded = LicenseSigner.fromSecretKey(pair.keyId, pair.secretKey, pair.publicKey, pair.keyIdInFiles);
    pair.secretKey.fill(0);
    return loaded;
  });
  const entry = { keyId, sealedWith, signer };
  signers.set(db, entry);
  // A failure (a wrong key-encryption key) is not remembered: the next call tries again.
  signer.catch(() => {
    if (signers.get(db) === entry) signers.delete(db);
  });
  return signer;
}

export function sealedWithOf(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

/** The key id whose parsed private key is held for `db`, if any: what a rotation must change. */
export function cachedSignerKeyId(db: Database): string | undefined {
  return signers.get(db)?.keyId;
}

/** Drops the cached key, e.g. after a restore has replaced the database's contents. */
export function forgetSigner(db: Database): void {
  signers.delete(db);
}
