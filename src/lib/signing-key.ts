import { createHash, randomUUID } from 'node:crypto';
import { recordAudit } from './audit.js';
import { now, type OperationContext } from './context.js';
import { LicenseServerError } from './errors.js';
import { publicKeyToPem } from './crypto/ed25519-pem.js';
import type { Database, Row } from './storage/types.js';
import { asBytesOrNull, asIso } from './storage/values.js';

export interface SigningKeyInfo {
  readonly id: string;
  readonly algorithm: 'Ed25519';
  readonly public_key_pem: string;
  /** SHA-256 of the 32 raw public key bytes, hex: a short way to compare keys by eye. */
  readonly fingerprint: string;
  readonly created_at: string;
}

/** The private half stays inside src/lib: nothing that returns this is exposed to output. */
export interface SigningKeyPair {
  readonly id: string;
  readonly publicKey: Uint8Array;
  readonly secretKey: Uint8Array;
}

/**
 * Returns the current signing key, generating it when there is none. Only `init` and
 * `serve` call this: any other command reading the key of a store that has none gets
 * SIGNING_KEY_MISSING, so a key is never made by accident (say, by `signing-key show`
 * run against the wrong store). Processes that race here (several daemons starting on one
 * PostgreSQL database) all end with the same key: the insert is ON CONFLICT DO NOTHING
 * against a unique index that admits one current key, and everyone reads back whichever
 * insert won.
 */
export async function ensureSigningKey(db: Database, context: OperationContext): Promise<SigningKeyInfo & { created: boolean }> {
  const existing = await findSigningKey(db);
  if (existing) return { ...existing, created: false };
  const created = await generateSigningKey(db, context);
  const current = await findSigningKey(db);
  if (!current) throw new Error('signing key vanished right after it was stored');
  return { ...current, created };
}

/** The current key's public description, or undefined when none has been generated yet. */
export async function findSigningKey(db: Database): Promise<SigningKeyInfo | undefined> {
  const rows = await db.query('SELECT id, public_key, created_at FROM signing_keys WHERE is_current = ?', [true]);
  const row = rows[0];
  return row ? describeKey(String(row.id), new Uint8Array(asBytesOrNull(row.public_key)!), row) : undefined;
}

/** The current key pair, for signing; SIGNING_KEY_MISSING when the store has none. */
export async function loadSigningKeyPair(db: Database): Promise<SigningKeyPair> {
  const current = await readCurrent(db);
  if (!current) throw signingKeyMissing();
  return current;
}

export function signingKeyMissing(): LicenseServerError {
  return new LicenseServerError('SIGNING_KEY_MISSING', 'this store has no signing key yet', {
    hint: 'Generate it with `license-server init` (or by starting `license-server serve`), or restore a backup that holds it.',
  });
}

/** Stores a new current key unless another process just did; true when this one won. */
async function generateSigningKey(db: Database, context: OperationContext): Promise<boolean> {
  const { ed25519 } = await import('@noble/curves/ed25519.js');
  const secretKey = ed25519.utils.randomSecretKey();
  const publicKey = ed25519.getPublicKey(secretKey);
  const id = randomUUID();
  const won = await db.transaction(async (tx) => {
    const inserted = await tx.query(
      `INSERT INTO signing_keys (id, algorithm, public_key, private_key, is_current, created_at)
       VALUES (?, 'Ed25519', ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`,
      [id, publicKey, secretKey, true, now(context).toISOString()],
    );
    if (inserted.length > 0) {
      await recordAudit(tx, context, {
        action: 'signing_key.created',
        entityType: 'signing_key',
        entityId: id,
        details: { algorithm: 'Ed25519', fingerprint: fingerprint(publicKey) },
      });
    }
    return inserted.length > 0;
  });
  secretKey.fill(0);
  return won;
}

async function readCurrent(db: Database): Promise<SigningKeyPair | undefined> {
  const rows = await db.query('SELECT id, public_key, private_key FROM signing_keys WHERE is_current = ?', [true]);
  const row = rows[0];
  if (!row) return undefined;
  return {
    id: String(row.id),
    publicKey: new Uint8Array(asBytesOrNull(row.public_key)!),
    secretKey: new Uint8Array(asBytesOrNull(row.private_key)!),
  };
}

function describeKey(id: string, publicKey: Uint8Array, row: Row): SigningKeyInfo {
  return {
    id,
    algorithm: 'Ed25519',
    public_key_pem: publicKeyToPem(publicKey),
    fingerprint: fingerprint(publicKey),
    created_at: asIso(row.created_at),
  };
}

export function fingerprint(publicKey: Uint8Array): string {
  return createHash('sha256').update(publicKey).digest('hex');
}
