import { createHash, randomUUID } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { publicKeyFromPem, publicKeyToPem } from '../crypto/ed25519-pem.js';
import { keyIdOf, type KeySet } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import type { Keyset } from '../cursor.js';
import { pageQuery, fetchPage, type ListPage, type Page, type PageQuery } from '../paging.js';
import type { Database, Queryable, Row } from '../storage/types.js';
import { asBool, asBytesOrNull, asIso, asIsoOrNull } from '../storage/values.js';
import { keyEncryptionKeyOf } from './kek-registry.js';

/**
 * The store's signing keys. Exactly one is active (it signs); a next key (`rotate --prepare`)
 * is in the key set before it signs anything, so clients can ship it ahead of the switch;
 * keys rotated away are verify-only (every file and token they signed keeps verifying) until
 * the operator retires them, which deletes the private key and takes the public one out of
 * the key set.
 */
export type SigningKeyState = 'active' | 'next' | 'verify-only' | 'retired';

export interface SigningKeyInfo {
  /** The row's id; audit entries of keys made before key ids name it. */
  readonly id: string;
  /** keyIdOf(public key): what files, grace tokens and key sets name the key by. */
  readonly key_id: string;
  readonly algorithm: 'Ed25519';
  readonly state: SigningKeyState;
  readonly public_key_pem: string;
  /** SHA-256 of the 32 raw public key bytes, hex; the key id is its first 16 digits. */
  readonly fingerprint: string;
  /** Whether the private key is stored sealed under the key-encryption key. */
  readonly sealed: boolean;
  readonly created_at: string;
  /** When it stopped being the active key. */
  readonly deactivated_at: string | null;
  readonly retired_at: string | null;
}

/** The private half stays inside src/lib: nothing that returns this is exposed to output. */
export interface SigningKeyPair {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  readonly secretKey: Uint8Array;
  /** Keys made before key ids (and a store's first key) sign files without `key_id`. */
  readonly keyIdInFiles: boolean;
}

const COLUMNS = 'id, key_id, public_key, sealed_with, is_current, created_at, deactivated_at, retired_at';

export const SIGNING_KEY_KEYSET: Keyset = {
  list: 'signing_keys',
  keys: [{ column: 'created_at', field: 'created_at', kind: 'timestamp' }, { column: 'key_id', field: 'key_id', kind: 'text' }],
};

/** Oldest first; the whole list when no page is asked for (backups record every key). */
export function signingKeyListQuery(page: Page = {}): PageQuery {
  return pageQuery(`SELECT ${COLUMNS} FROM signing_keys`, [], [], SIGNING_KEY_KEYSET, {}, page, { whole: true });
}

export async function listSigningKeysPage(db: Queryable, page: Page = {}): Promise<ListPage<SigningKeyInfo>> {
  return fetchPage(db, signingKeyListQuery(page), describeKey);
}

export async function listSigningKeys(db: Queryable, page: Page = {}): Promise<SigningKeyInfo[]> {
  return (await listSigningKeysPage(db, page)).items;
}

/** The active key's public description, or undefined when none has been generated yet. */
export async function findSigningKey(db: Queryable): Promise<SigningKeyInfo | undefined> {
  const rows = await db.query(`SELECT ${COLUMNS} FROM signing_keys WHERE is_current = ?`, [true]);
  return rows[0] ? describeKey(rows[0]) : undefined;
}

/** One key by its key id; SIGNING_KEY_NOT_FOUND when the store has no such key. */
export async function getSigningKey(db: Queryable, keyId: string): Promise<SigningKeyInfo> {
  const rows = await db.query(`SELECT ${COLUMNS} FROM signing_keys WHERE key_id = ?`, [keyId]);
  if (!rows[0]) {
    throw new LicenseServerError('SIGNING_KEY_NOT_FOUND', `this store has no signing key ${JSON.stringify(keyId)}`, {
      hint: 'List the keys with `license-server signing-key list`.',
    });
  }
  return describeKey(rows[0]);
}

/** The keys that verify, as descriptions: the active one first, then the next and verify-only ones, newest first. */
export async function listVerifyingKeys(db: Queryable): Promise<SigningKeyInfo[]> {
  const rows = await db.query(`SELECT ${COLUMNS} FROM signing_keys WHERE retired_at IS NULL`);
  const infos = rows.map(describeKey);
  infos.sort((a, b) => Number(b.state === 'active') - Number(a.state === 'active') || b.created_at.localeCompare(a.created_at) || a.key_id.localeCompare(b.key_id));
  return infos;
}

/** The same keys as a key set for the verifiers (crypto/key-set.ts). */
export async function loadKeySet(db: Queryable): Promise<KeySet> {
  return (await listVerifyingKeys(db)).map((info) => ({ keyId: info.key_id, publicKey: publicKeyFromPem(info.public_key_pem) }));
}

/**
 * Returns the active signing key, generating the store's first one when there is none.
 * Only `init` and `serve` call this: any other command reading the key of a store that has
 * none gets SIGNING_KEY_MISSING, so a key is never made by accident. Processes that race
 * here (several daemons starting on one PostgreSQL database) all end with the same key: the
 * insert is ON CONFLICT DO NOTHING against the unique index that admits one active key.
 */
export async function ensureSigningKey(db: Database, context: OperationContext): Promise<SigningKeyInfo & { created: boolean }> {
  const existing = await findSigningKey(db);
  if (existing) return { ...existing, created: false };
  const { ed25519 } = await import('@noble/curves/ed25519.js');
  const secretKey = ed25519.utils.randomSecretKey();
  const created = await db.transaction((tx) =>
    // The first key writes no key_id into files, so clients built before key ids read them.
    insertSigningKey(tx, db, { secretKey, active: true, keyIdInFiles: false }, context, 'signing_key.created'),
  );
  secretKey.fill(0);
  const current = await findSigningKey(db);
  if (!current) throw new Error('signing key vanished right after it was stored');
  return { ...current, created: created !== undefined };
}

/**
 * Stores a key (sealed when the store has a key-encryption key) and audits it; undefined
 * when an active key was asked for and another process stored one first.
 */
export async function insertSigningKey(
  tx: Queryable,
  db: Database,
  key: {
    readonly secretKey: Uint8Array;
    readonly active: boolean;
    readonly keyIdInFiles: boolean;
    /** Set for a key stored verify-only (an escrowed key that signed elsewhere); unset, an inactive key is a next key. */
    readonly deactivatedAt?: string;
  },
  context: OperationContext,
  action: string,
  details: Record<string, unknown> = {},
): Promise<SigningKeyInfo | undefined> {
  const { ed25519 } = await import('@noble/curves/ed25519.js');
  const publicKey = ed25519.getPublicKey(key.secretKey);
  const keyId = keyIdOf(publicKey);
  const kek = keyEncryptionKeyOf(db);
  let stored: Uint8Array = key.secretKey;
  let sealedWith: string | null = null;
  if (kek) {
    const { kekIdOf, sealSecretKey } = await import('./protection.js');
    stored = sealSecretKey(key.secretKey, kek, keyId);
    sealedWith = kekIdOf(kek);
  }
  const at = now(context).toISOString();
  const inserted = await tx.query(
    `INSERT INTO signing_keys (id, key_id, algorithm, public_key, private_key, sealed_with, key_id_in_files, is_current, created_at, deactivated_at)
     VALUES (?, ?, 'Ed25519', ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
    [randomUUID(), keyId, publicKey, stored, sealedWith, key.keyIdInFiles, key.active, at, key.deactivatedAt ?? null],
  );
  if (!inserted[0]) return undefined;
  const info = describeKey(inserted[0]);
  await recordAudit(tx, context, {
    action,
    entityType: 'signing_key',
    entityId: info.id,
    details: { key_id: keyId, algorithm: 'Ed25519', fingerprint: info.fingerprint, sealed: sealedWith !== null, ...details },
  });
  return info;
}

/**
 * A key pair for signing: the one of `keyId`, or the active one. SIGNING_KEY_MISSING when
 * there is no such key with its private half (the store has none yet, or it was retired).
 * Read through `reader` (a transaction) when given; `db` names the store's key-encryption key.
 */
export async function loadKeyPair(db: Database, keyId?: string, reader: Queryable = db): Promise<SigningKeyPair> {
  const rows = await reader.query(
    `SELECT key_id, public_key, private_key, sealed_with, key_id_in_files FROM signing_keys
     WHERE ${keyId === undefined ? 'is_current = ?' : 'key_id = ? AND private_key IS NOT NULL'}`,
    [keyId ?? true],
  );
  const row = rows[0];
  if (!row) throw signingKeyMissing();
  const id = String(row.key_id);
  const sealedWith = row.sealed_with === null ? null : String(row.sealed_with);
  let secretKey: Uint8Array = new Uint8Array(asBytesOrNull(row.private_key)!);
  if (sealedWith !== null) {
    const { openSecretKey } = await import('./protection.js');
    secretKey = openSecretKey(secretKey, sealedWith, keyEncryptionKeyOf(db), id);
  }
  return { keyId: id, publicKey: new Uint8Array(asBytesOrNull(row.public_key)!), secretKey, keyIdInFiles: asBool(row.key_id_in_files) };
}

/** How many private keys the store holds unsealed (what a backup without encryption exposes). */
export async function unsealedPrivateKeys(db: Queryable): Promise<number> {
  const rows = await db.query('SELECT count(*) AS n FROM signing_keys WHERE private_key IS NOT NULL AND sealed_with IS NULL');
  return Number(rows[0]?.n ?? 0);
}

export function signingKeyMissing(): LicenseServerError {
  return new LicenseServerError('SIGNING_KEY_MISSING', 'this store has no signing key yet', {
    hint: 'Generate it with `license-server init` (or by starting `license-server serve`), or restore a backup that holds it.',
  });
}

function describeKey(row: Row): SigningKeyInfo {
  const publicKey = new Uint8Array(asBytesOrNull(row.public_key)!);
  const retiredAt = asIsoOrNull(row.retired_at);
  return {
    id: String(row.id),
    key_id: String(row.key_id),
    algorithm: 'Ed25519',
    state: asBool(row.is_current) ? 'active' : retiredAt !== null ? 'retired' : row.deactivated_at === null ? 'next' : 'verify-only',
    public_key_pem: publicKeyToPem(publicKey),
    fingerprint: fingerprint(publicKey),
    sealed: row.sealed_with !== null && row.sealed_with !== undefined,
    created_at: asIso(row.created_at),
    deactivated_at: asIsoOrNull(row.deactivated_at),
    retired_at: retiredAt,
  };
}

export function fingerprint(publicKey: Uint8Array): string {
  return createHash('sha256').update(publicKey).digest('hex');
}
