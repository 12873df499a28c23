import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { loadSigningKeyPair } from '../signing-key.js';
import type { Database } from '../storage/types.js';

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
    private readonly key: KeyObject,
  ) {}

  static fromSecretKey(keyId: string, secretKey: Uint8Array, publicKey: Uint8Array): LicenseSigner {
    const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, secretKey]), format: 'der', type: 'pkcs8' });
    return new LicenseSigner(keyId, publicKey, key);
  }

  sign(message: Uint8Array): Uint8Array {
    return new Uint8Array(sign(null, message, this.key));
  }
}

const signers = new WeakMap<Database, Promise<LicenseSigner>>();

/** The current signing key of this database, loaded once per open database (SIGNING_KEY_MISSING when there is none). */
export function getSigner(db: Database): Promise<LicenseSigner> {
  let signer = signers.get(db);
  if (!signer) {
    signer = loadSigningKeyPair(db).then((pair) => {
      const loaded = LicenseSigner.fromSecretKey(pair.id, pair.secretKey, pair.publicKey);
      pair.secretKey.fill(0);
      return loaded;
    });
    signer.catch(() => signers.delete(db));
    signers.set(db, signer);
  }
  return signer;
}

/** Drops the cached key, e.g. after a restore has replaced the database's contents. */
export function forgetSigner(db: Database): void {
  signers.delete(db);
}
