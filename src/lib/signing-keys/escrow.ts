import { createCipheriv, createPrivateKey, pbkdf2Sync, randomBytes } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { keyIdOf } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import type { Database } from '../storage/types.js';
import { findSigningKey, getSigningKey, insertSigningKey, loadKeyPair, type SigningKeyInfo } from './keys.js';
import { demoteActiveKey } from './rotation.js';

/**
 * Escrow copies of private signing keys: PKCS#8 EncryptedPrivateKeyInfo (RFC 5958) under a
 * passphrase, PBES2 (RFC 8018) with PBKDF2-HMAC-SHA256 and AES-256-CBC, as PEM that
 * `openssl pkey` opens. node:crypto writes PKCS#8 with 2,048 PBKDF2 iterations, too few for
 * a file meant to sit in a safe for years, so the structure is written here with
 * ESCROW_ITERATIONS (OWASP's 2023 figure for PBKDF2-HMAC-SHA256); node:crypto reads it back.
 */
export const ESCROW_ITERATIONS = 600_000;

// RFC 8410 PKCS#8 of an Ed25519 seed: this prefix, then the 32 seed bytes.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const OID = {
  pbes2: '06092a864886f70d01050d',
  pbkdf2: '06092a864886f70d01050c',
  hmacWithSha256: '06082a864886f70d0209',
  aes256Cbc: '060960864801650304012a',
};

function der(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const length = body.length < 0x80 ? Buffer.from([body.length]) : body.length < 0x100 ? Buffer.from([0x81, body.length]) : Buffer.from([0x82, body.length >> 8, body.length & 0xff]);
  return Buffer.concat([Buffer.from([tag]), length, body]);
}
const sequence = (...parts: Buffer[]) => der(0x30, ...parts);
const octets = (bytes: Buffer) => der(0x04, bytes);
const integer = (value: number) => {
  const hex = value.toString(16);
  const bytes = Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
  // DER integers are signed: a leading byte with its high bit set needs a zero before it.
  return der(0x02, bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
};
const oid = (hex: string) => Buffer.from(hex, 'hex');

/** The PEM of an encrypted PKCS#8 file holding `secretKey` (a 32-byte Ed25519 seed). */
export function encryptPrivateKey(secretKey: Uint8Array, passphrase: string, iterations = ESCROW_ITERATIONS): string {
  const salt = randomBytes(16);
  const iv = randomBytes(16);
  const key = pbkdf2Sync(Buffer.from(passphrase, 'utf8'), salt, iterations, 32, 'sha256');
  const cipher = createCipheriv('aes-256-cbc', key, iv);
  const plain = Buffer.concat([PKCS8_PREFIX, secretKey]);
  const encrypted = Buffer.concat([cipher.update(plain), cipher.final()]);
  plain.fill(0);
  key.fill(0);
  const info = sequence(
    sequence(
      oid(OID.pbes2),
      sequence(
        sequence(oid(OID.pbkdf2), sequence(octets(salt), integer(iterations), sequence(oid(OID.hmacWithSha256), Buffer.from('0500', 'hex')))),
        sequence(oid(OID.aes256Cbc), octets(iv)),
      ),
    ),
    octets(encrypted),
  );
  const lines = info.toString('base64').match(/.{1,64}/g)!;
  return `-----BEGIN ENCRYPTED PRIVATE KEY-----\n${lines.join('\n')}\n-----END ENCRYPTED PRIVATE KEY-----\n`;
}

/** The 32-byte seed in an encrypted PKCS#8 PEM (ours or `openssl pkcs8 -topk8`'s); KEY_FILE_INVALID otherwise. */
export function decryptPrivateKey(pem: string, passphrase: string, source: string): Uint8Array {
  if (!pem.includes('-----BEGIN ENCRYPTED PRIVATE KEY-----')) {
    throw new LicenseServerError('KEY_FILE_INVALID', `${source} is not an encrypted PKCS#8 private key (no "ENCRYPTED PRIVATE KEY" block)`);
  }
  let key;
  try {
    key = createPrivateKey({ key: pem, format: 'pem', passphrase: Buffer.from(passphrase, 'utf8') });
  } catch {
    throw new LicenseServerError('KEY_FILE_INVALID', `the passphrase does not open ${source}, or the file is damaged`);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new LicenseServerError('KEY_FILE_INVALID', `${source} holds a ${key.asymmetricKeyType ?? 'non-Ed25519'} key, not an Ed25519 signing key`);
  }
  const plain = key.export({ format: 'der', type: 'pkcs8' });
  return new Uint8Array(plain.subarray(plain.length - 32));
}

/** The escrow PEM of one key (any that still has its private half), audited. */
export async function exportSigningKey(db: Database, keyId: string, passphrase: string, context: OperationContext): Promise<{ key: SigningKeyInfo; pem: string }> {
  const key = await getSigningKey(db, keyId);
  if (key.state === 'retired') throw new LicenseServerError('SIGNING_KEY_RETIRED', `signing key ${key.key_id} was retired at ${key.retired_at}; its private key is gone`);
  const pair = await loadKeyPair(db, key.key_id);
  try {
    const pem = encryptPrivateKey(pair.secretKey, passphrase);
    await db.transaction((tx) =>
      recordAudit(tx, context, { action: 'signing_key.exported', entityType: 'signing_key', entityId: key.id, details: { key_id: key.key_id, format: 'pkcs8-pbes2' } }),
    );
    return { key, pem };
  } finally {
    pair.secretKey.fill(0);
  }
}

export interface ImportOptions {
  /** Make it the active signer (the active key becomes verify-only); otherwise it only verifies. */
  readonly activate: boolean;
  /** Files it signs omit key_id, as a store's first key does (for clients built before key ids). */
  readonly keyIdInFiles: boolean;
}

/** Brings an escrowed key back; SIGNING_KEY_EXISTS when the store holds it already. Audited. */
export async function importSigningKey(db: Database, secretKey: Uint8Array, options: ImportOptions, context: OperationContext): Promise<SigningKeyInfo> {
  const { ed25519 } = await import('@noble/curves/ed25519.js');
  const keyId = keyIdOf(ed25519.getPublicKey(secretKey));
  const exists = () => new LicenseServerError('SIGNING_KEY_EXISTS', `this store already holds signing key ${keyId}`);
  try {
    return await db.transaction(async (tx) => {
      if ((await tx.query('SELECT 1 FROM signing_keys WHERE key_id = ?', [keyId])).length > 0) throw exists();
      const previous = options.activate ? await findSigningKey(tx) : undefined;
      if (previous) await demoteActiveKey(tx, previous, context);
      // Not activated, an escrowed key is verify-only (it signed elsewhere), never a next key that rotate would switch to.
      const deactivatedAt = options.activate ? undefined : now(context).toISOString();
      const inserted = await insertSigningKey(tx, db, { secretKey, active: options.activate, keyIdInFiles: options.keyIdInFiles, deactivatedAt }, context, 'signing_key.imported', {
        activated: options.activate,
        ...(previous ? { previous_key_id: previous.key_id } : {}),
      });
      if (!inserted) throw exists();
      return inserted;
    });
  } finally {
    secretKey.fill(0);
  }
}
