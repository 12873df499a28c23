import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import type { Database } from '../storage/types.js';
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
}

const signers = new WeakMap<Database, Map<string, Promise<LicenseSigner>>>();

/**
 * The signer of the store's active key. Which key is active is read from the database on
 * every call (one indexed row): a rotation by another daemon or the command line takes
 * effect on the next signature here, so daemons sharing a database switch keys together.
 * The parsed private key is kept per database and key id. SIGNING_KEY_MISSING without a key.
 */
export async function getSigner(db: Database): Promise<LicenseSigner> {
  const rows = await db.query('SELECT key_id FROM signing_keys WHERE is_current = ?', [true]);
  if (!rows[0]) throw signingKeyMissing();
  const keyId = String(rows[0].key_id);
  let byKey = signers.get(db);
  if (!byKey) signers.set(db, (byKey = new Map()));
  let signer = byKey.get(keyId);
  if (!signer) {
    signer = loadKeyPair(db, keyId).then((pair) => {
      const loaded = LicenseSigner.fromSecretKey(pair.keyId, pair.secretKey, pair.publicKey, pair.keyIdInFiles);
      pair.secretKey.fill(0);
      return loaded;
    });
    const cache = byKey;
    signer.catch(() => cache.delete(keyId));
    byKey.set(keyId, signer);
  }
  return signer;
}

/** Drops the cached keys, e.g. after a restore has replaced the database's contents. */
export function forgetSigner(db: Database): void {
  signers.delete(db);
}
