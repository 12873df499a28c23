import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { raiseEvent } from '../notifications/outbox.js';
import type { Database, Engine, Queryable } from '../storage/types.js';
import { endorseKeys } from './endorsements.js';
import { findSigningKey, getSigningKey, insertSigningKey, signingKeyMissing, type SigningKeyInfo } from './keys.js';

/**
 * Makes the next key (`prepareSigningKey`), or a new key when none was prepared, the active
 * signer; the old one becomes verify-only. Whoever rotates second, on this or another daemon
 * sharing the database, finds the active key is no longer the one it read and fails with
 * SIGNING_KEY_CONFLICT, changing nothing: one rotation wins and there is never a moment with
 * two active keys (a unique index admits one).
 */
export async function rotateSigningKey(db: Database, context: OperationContext): Promise<{ previous: SigningKeyInfo; active: SigningKeyInfo }> {
  const previous = await findSigningKey(db);
  if (!previous) throw signingKeyMissing();
  const { ed25519 } = await import('@noble/curves/ed25519.js');
  const secretKey = ed25519.utils.randomSecretKey();
  try {
    const active = await db.transaction(async (tx) => {
      await demoteActiveKey(tx, previous, context);
      const next = await findNextKey(tx);
      let active: SigningKeyInfo;
      if (next) {
        await tx.execute('UPDATE signing_keys SET is_current = ? WHERE id = ? AND is_current = ?', [true, next.id, false]);
        await recordAudit(tx, context, {
          action: 'signing_key.rotated',
          entityType: 'signing_key',
          entityId: next.id,
          details: { key_id: next.key_id, previous_key_id: previous.key_id, prepared: true },
        });
        active = await getSigningKey(tx, next.key_id);
      } else {
        const inserted = await insertSigningKey(tx, db, { secretKey, active: true, keyIdInFiles: true }, context, 'signing_key.rotated', {
          previous_key_id: previous.key_id,
          prepared: false,
        });
        if (!inserted) throw rotationConflict(previous.key_id);
        active = inserted;
      }
      // A new key is endorsed by the keys clients already trust before anything it signs goes out.
      await endorseKeys(db, context, tx);
      await raiseEvent(tx, 'signing_key.rotated', {
        key_id: active.key_id,
        previous_key_id: previous.key_id,
        fingerprint: active.fingerprint,
        prepared: next !== undefined,
        actor: context.actor,
      }, context);
      return active;
    });
    return { previous: await getSigningKey(db, previous.key_id), active };
  } finally {
    secretKey.fill(0);
  }
}

/**
 * Makes the key the next rotation will switch to, and puts it in the key set now, so that
 * clients released before the switch already trust it. One next key at a time: when there
 * is one, it is returned (`created: false`).
 */
export async function prepareSigningKey(db: Database, context: OperationContext): Promise<SigningKeyInfo & { created: boolean }> {
  if (!(await findSigningKey(db))) throw signingKeyMissing();
  const { ed25519 } = await import('@noble/curves/ed25519.js');
  const secretKey = ed25519.utils.randomSecretKey();
  try {
    return await db.transaction(async (tx) => {
      const existing = await findNextKey(tx);
      if (existing) return { ...existing, created: false };
      const inserted = await insertSigningKey(tx, db, { secretKey, active: false, keyIdInFiles: true }, context, 'signing_key.prepared');
      if (!inserted) throw new Error('a freshly generated signing key collided with a stored one');
      await endorseKeys(db, context, tx);
      return { ...inserted, created: true };
    });
  } finally {
    secretKey.fill(0);
  }
}

async function findNextKey(tx: Queryable): Promise<SigningKeyInfo | undefined> {
  const rows = await tx.query(
    'SELECT key_id FROM signing_keys WHERE is_current = ? AND deactivated_at IS NULL AND retired_at IS NULL ORDER BY created_at DESC, key_id LIMIT 1',
    [false],
  );
  return rows[0] ? getSigningKey(tx, String(rows[0].key_id)) : undefined;
}

/**
 * Makes `previous`, read as the active key, verify-only; SIGNING_KEY_CONFLICT when it is no
 * longer the active key (on PostgreSQL a concurrent demotion holds the row until it commits,
 * and this one then finds the row changed).
 */
export async function demoteActiveKey(tx: Queryable, previous: SigningKeyInfo, context: OperationContext): Promise<void> {
  const demoted = await tx.query('UPDATE signing_keys SET is_current = ?, deactivated_at = ? WHERE id = ? AND is_current = ? RETURNING id', [
    false,
    now(context).toISOString(),
    previous.id,
    true,
  ]);
  if (demoted.length === 0) throw rotationConflict(previous.key_id);
}

function rotationConflict(keyId: string): LicenseServerError {
  return new LicenseServerError('SIGNING_KEY_CONFLICT', `another rotation replaced the active key ${keyId} first; this one changed nothing`);
}

export interface RetireOptions {
  /** Retire even though files or grace tokens it signed may still be valid. */
  readonly force?: boolean;
  /** The grace.hours setting: how long grace tokens live. */
  readonly graceHours: number;
  /** database.url, for erasing the deleted private key from the database files (erase.ts). */
  readonly databaseUrl: string;
  readonly erase?: import('./erase.js').EraseOptions;
}

/**
 * Retires a verify-only key: its private half is deleted and it leaves the key set, so
 * everything it signed stops verifying. Refused for the active key, and while a file or a
 * grace token it signed may still be valid (see signedUntil) unless `force`. The deleted
 * bytes are then erased from the database files (erase.ts; `erase_warning` says when not).
 */
export async function retireSigningKey(
  db: Database,
  keyId: string,
  options: RetireOptions,
  context: OperationContext,
): Promise<SigningKeyInfo & { signed_valid_until: string | null; forced: boolean; erase_warning: string | null }> {
  const retired = await db.transaction(async (tx) => {
    const key = await getSigningKey(tx, keyId);
    if (key.state === 'active') {
      throw new LicenseServerError('SIGNING_KEY_ACTIVE', `signing key ${key.key_id} is the active key and cannot be retired`);
    }
    if (key.state === 'retired') throw new LicenseServerError('SIGNING_KEY_RETIRED', `signing key ${key.key_id} was retired at ${key.retired_at}`);
    const at = now(context);
    const until = await signedUntil(tx, db.engine, key, options.graceHours);
    const inUse = until !== null && Date.parse(until) > at.getTime();
    if (inUse && options.force !== true) {
      throw new LicenseServerError(
        'SIGNING_KEY_IN_USE',
        `signing key ${key.key_id} signed files or grace tokens that may be valid until ${until}; retiring it now makes them fail verification`,
      );
    }
    const retired = await tx.query(
      `UPDATE signing_keys SET retired_at = ?, private_key = NULL, sealed_with = NULL
       WHERE id = ? AND is_current = ? AND retired_at IS NULL RETURNING retired_at`,
      [at.toISOString(), key.id, false],
    );
    if (retired.length === 0) throw new LicenseServerError('SIGNING_KEY_RETIRED', `signing key ${key.key_id} was retired meanwhile`);
    await recordAudit(tx, context, {
      action: 'signing_key.retired',
      entityType: 'signing_key',
      entityId: key.id,
      details: { key_id: key.key_id, forced: inUse, signed_valid_until: until },
    });
    return { ...(await getSigningKey(tx, keyId)), signed_valid_until: until, forced: inUse };
  });
  const { eraseReplacedKeys } = await import('./erase.js');
  return { ...retired, erase_warning: await eraseReplacedKeys(db, options.databaseUrl, options.erase) };
}

/**
 * The latest time at which something this key signed may still be valid, or null when it
 * never signed anything that outlives it:
 * - `.lic` files: the latest valid_until among the checkouts the audit log records for the
 *   key (by key id, or by row id for checkouts made before key ids), but voided ones;
 * - grace tokens: the key stopped signing at deactivated_at, and a token lives at most
 *   grace.hours, or a floating license's lease_hours when that is longer.
 */
export async function signedUntil(db: Queryable, engine: Engine, key: SigningKeyInfo, graceHours: number): Promise<string | null> {
  const field = (table: string, name: string) => (engine === 'postgres' ? `${table}.details->>'${name}'` : `json_extract(${table}.details, '$.${name}')`);
  // A voided checkout's file was never written (offline/checkout-file.ts): it signed nothing that exists.
  const files = await db.query(
    `SELECT max(${field('c', 'valid_until')}) AS until FROM audit_log c
     WHERE c.action = 'license.checked_out' AND ${field('c', 'signing_key_id')} IN (?, ?)
     AND NOT EXISTS (SELECT 1 FROM audit_log v WHERE v.entity_type = 'license' AND v.entity_id = c.entity_id
       AND v.action = 'license.checkout_voided' AND ${field('v', 'checkout_id')} = ${field('c', 'checkout_id')})`,
    [key.key_id, key.id],
  );
  const leases = await db.query('SELECT max(lease_hours) AS hours FROM licenses WHERE floating = ?', [true]);
  const tokenHours = Math.max(graceHours, Number(leases[0]?.hours ?? 0));
  const tokensUntil = key.deactivated_at === null ? null : Date.parse(key.deactivated_at) + tokenHours * 3_600_000;
  const filesUntil = files[0]?.until ? Date.parse(String(files[0].until)) : null;
  const latest = Math.max(tokensUntil ?? Number.NEGATIVE_INFINITY, filesUntil ?? Number.NEGATIVE_INFINITY);
  return Number.isFinite(latest) ? new Date(latest).toISOString() : null;
}

