import { keyIdOf } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import type { SigningKeyState } from '../signing-keys/keys.js';
import type { Queryable, Row } from '../storage/types.js';
import { asBool, asBytesOrNull, asIso, asIsoOrNull } from '../storage/values.js';

/**
 * A restore puts back the backup's data, but never a signing key's past (docs/backup-format.md,
 * "What a restore keeps"): the keys of the database being replaced are read just before the
 * swap and merged into the restored data inside it, as RevocationCarry does for revocations.
 *
 * A key only moves forward in its life (next, active, verify-only, retired), and a restore
 * does not move it back: of a key both hold, the restored data gets the state further along
 * (the replaced database's row, with its sealing, on a tie), so a key retired after the backup
 * stays retired, its private half gone. A key the backup lacks (made, prepared or imported
 * after it) is carried in whole, private key as stored: files it signed are in the wild and
 * clients may trust only it. Exactly one key is then active: the replaced database's active key
 * when both sides' active keys survive (the backup's becomes verify-only), else the one left;
 * with none left, the newest key that is not retired. So a retired key never signs again, and
 * after restoring a backup older than a rotation the key rotated to signs on.
 *
 * A backup that shares no key with a database that has keys is another server's: its key set
 * replaces this one, nothing is merged (its admin tokens replace this server's too), and the
 * report says so; previewRestore says so before. It is decided here from the restored data
 * itself (a key shared is the same id with the same public key), never from what the index or
 * manifest lists, and only with `replaceKeys` does such a restore go on.
 */
export class SigningKeyCarry {
  /** Undefined until read: a restore onto a new host (no database yet) has nothing to carry. */
  private replaced: StoredKey[] | undefined;
  private outcome: CarriedSigningKeys = { another_server: false, changes: [], erase: false };
  /** Whether apply() has run on the restored data (it waits for a migration when the backup is older than schema 5). */
  applied = false;

  /**
   * `replaceKeys`: another server's backup may replace this server's keys and admin tokens.
   * Never implied by confirming the restore itself: without it, apply() refuses such a backup
   * (RESTORE_KEYS_NOT_CONFIRMED) before the restored data becomes live.
   */
  constructor(private readonly options: { readonly replaceKeys?: boolean } = {}) {}

  /** Reads the keys of the database about to be replaced; `current` is false for a layout before schema 5. */
  async read(current: Queryable, options: { current: boolean }): Promise<void> {
    this.replaced = (await current.query('SELECT * FROM signing_keys')).map((row) => storedKey(row, options.current));
  }

  /**
   * Merges them into the restored data, before it becomes the live database, or refuses the
   * restored data when it is another server's and that was not confirmed. When the restored
   * table has a layout before schema 5 (`current` false) it only decides that, before the
   * swap as always; the caller applies it again after the migration, which merges.
   */
  async apply(restored: Queryable, options: { current: boolean; at: Date }): Promise<void> {
    if (this.applied) return;
    if (!this.replaced) {
      this.applied = options.current;
      return;
    }
    const backup = (await restored.query('SELECT * FROM signing_keys')).map((row) => storedKey(row, options.current));
    refuseOtherKeysUnderOurIds(this.replaced, backup);
    const plan = planKeySet(this.replaced.map(summary), backup.map(summary));
    if (plan.another_server && !this.options.replaceKeys) throw keyReplacementNotConfirmed();
    if (!options.current) return;
    this.applied = true;
    const erase = plan.another_server ? false : await merge(restored, plan, this.replaced, backup, options.at);
    this.outcome = { another_server: plan.another_server, changes: changesOf(plan), erase };
    this.dispose();
  }

  /** Zeroes the private keys read, whether or not they were applied. */
  dispose(): void {
    for (const key of this.replaced ?? []) key.privateKey?.fill(0);
  }

  get result(): CarriedSigningKeys {
    return this.outcome;
  }
}

/**
 * The refusal of another server's backup whose key replacement was not confirmed (restore
 * checks it from the manifest first, and here from the data).
 */
export function keyReplacementNotConfirmed(backupId?: string): LicenseServerError {
  return new LicenseServerError(
    'RESTORE_KEYS_NOT_CONFIRMED',
    `${backupId ? `backup ${backupId}` : 'the backup'} is another server's (it shares no signing key with this one): its signing keys and admin tokens would replace this server's, which a restore does only when that is confirmed on its own (backup restore --replace-keys; API: "replace_keys": true, with an admin token); nothing was replaced`,
  );
}

/**
 * A key id is the SHA-256 of its public key (key-set.ts), so a backup whose key has one of
 * this server's ids with another public key was not made from this server's data: it would
 * pass for sharing a key, and be merged, while it shares none. Refused as damaged.
 */
function refuseOtherKeysUnderOurIds(replaced: readonly StoredKey[], backup: readonly StoredKey[]): void {
  const ours = new Map(replaced.map((key) => [key.keyId, key.publicKey]));
  for (const key of backup) {
    const publicKey = ours.get(key.keyId);
    if (publicKey && !publicKey.equals(key.publicKey)) {
      throw new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: its signing key ${key.keyId} has another public key than this server's key of that id (a key id is its public key's SHA-256); nothing was replaced`);
    }
  }
}

/** What the restore did to the key set (RestoreReport.signing_keys). */
export interface CarriedSigningKeys {
  /** The backup shares no signing key with the replaced database, which had some: its keys replaced this server's. */
  readonly another_server: boolean;
  /** Every key whose state after the restore differs from the replaced database's or the backup's. */
  readonly changes: SigningKeyChange[];
  /** Whether a private key the restored data held was deleted or replaced (the caller erases it from the files). */
  readonly erase: boolean;
}

export interface SigningKeyChange {
  readonly key_id: string;
  /** In the replaced database (null: it had no such key). */
  readonly before: SigningKeyState | null;
  /** In the backup (null: it had no such key). */
  readonly backup: SigningKeyState | null;
  /** After the restore (null: gone from the store, and from its key set). */
  readonly after: SigningKeyState | null;
}

/** A key as the plan sees it: what a backup's manifest lists too. */
export interface KeySummary {
  readonly key_id: string;
  readonly state: SigningKeyState;
  readonly created_at: string;
}

export interface KeyPlan {
  readonly another_server: boolean;
  readonly keys: ReadonlyArray<SigningKeyChange & { readonly from: 'backup' | 'replaced'; readonly created_at: string }>;
}

const RANK: Record<SigningKeyState, number> = { next: 0, active: 1, 'verify-only': 2, retired: 3 };

/** The key set a restore ends with (see SigningKeyCarry), from both sides' keys alone. */
export function planKeySet(replaced: readonly KeySummary[], backup: readonly KeySummary[]): KeyPlan {
  const inBackup = new Map(backup.map((key) => [key.key_id, key]));
  const inReplaced = new Map(replaced.map((key) => [key.key_id, key]));
  const anotherServer = replaced.length > 0 && !replaced.some((key) => inBackup.has(key.key_id));
  if (anotherServer || replaced.length === 0) {
    return {
      another_server: anotherServer,
      keys: [
        ...replaced.map((key) => ({ key_id: key.key_id, before: key.state, backup: null, after: null, from: 'replaced' as const, created_at: key.created_at })),
        ...backup.map((key) => ({ key_id: key.key_id, before: null, backup: key.state, after: key.state, from: 'backup' as const, created_at: key.created_at })),
      ],
    };
  }
  const ids = [...new Set([...inReplaced.keys(), ...inBackup.keys()])];
  const keys = ids.map((keyId) => {
    const r = inReplaced.get(keyId);
    const b = inBackup.get(keyId);
    const from: 'backup' | 'replaced' = r && (!b || RANK[r.state] >= RANK[b.state]) ? 'replaced' : 'backup';
    const chosen = (from === 'replaced' ? r : b)!;
    return { key_id: keyId, before: r?.state ?? null, backup: b?.state ?? null, after: chosen.state as SigningKeyState | null, from, created_at: chosen.created_at };
  });
  const active = keys.filter((key) => key.after === 'active');
  if (active.length > 1) {
    // Two histories went apart (each rotated on its own): this server's signer signs on.
    const keep = active.find((key) => key.before === 'active') ?? active[0]!;
    for (const key of active) if (key !== keep) key.after = 'verify-only';
  } else if (active.length === 0) {
    const newest = keys.filter((key) => key.after !== 'retired').sort((a, b) => b.created_at.localeCompare(a.created_at) || a.key_id.localeCompare(b.key_id))[0];
    if (newest) newest.after = 'active';
  }
  return { another_server: false, keys: keys.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.key_id.localeCompare(b.key_id)) };
}

export function changesOf(plan: KeyPlan): SigningKeyChange[] {
  return plan.keys.filter((key) => key.before !== key.after || key.backup !== key.after).map(({ key_id, before, backup, after }) => ({ key_id, before, backup, after }));
}

/** Writes the plan into the restored table; true when a private key it held was deleted or replaced. */
async function merge(restored: Queryable, plan: KeyPlan, replaced: readonly StoredKey[], backup: readonly StoredKey[], at: Date): Promise<boolean> {
  const fromReplaced = new Map(replaced.map((key) => [key.keyId, key]));
  const fromBackup = new Map(backup.map((key) => [key.keyId, key]));
  let erase = false;
  for (const key of plan.keys.filter((candidate) => candidate.from === 'replaced')) {
    const row = fromReplaced.get(key.key_id)!;
    const existing = fromBackup.get(key.key_id);
    // Not current yet: the one active key is set last, so that the unique index never sees two.
    if (existing) {
      erase ||= existing.privateKey !== null && (row.privateKey === null || !row.privateKey.equals(existing.privateKey));
      await restored.execute(
        'UPDATE signing_keys SET private_key = ?, sealed_with = ?, key_id_in_files = ?, is_current = ?, deactivated_at = ?, retired_at = ? WHERE key_id = ?',
        [row.privateKey, row.sealedWith, row.keyIdInFiles, false, row.deactivatedAt, row.retiredAt, key.key_id],
      );
    } else {
      await restored.execute(
        `INSERT INTO signing_keys (id, key_id, algorithm, public_key, private_key, sealed_with, key_id_in_files, is_current, created_at, deactivated_at, retired_at)
         VALUES (?, ?, 'Ed25519', ?, ?, ?, ?, ?, ?, ?, ?)`,
        [row.id, row.keyId, row.publicKey, row.privateKey, row.sealedWith, row.keyIdInFiles, false, row.createdAt, row.deactivatedAt, row.retiredAt],
      );
    }
  }
  const active = plan.keys.find((key) => key.after === 'active');
  await restored.execute('UPDATE signing_keys SET is_current = ?, deactivated_at = COALESCE(deactivated_at, ?) WHERE is_current = ? AND key_id <> ?', [
    false,
    at.toISOString(),
    true,
    active?.key_id ?? '',
  ]);
  if (active) await restored.execute('UPDATE signing_keys SET is_current = ? WHERE key_id = ?', [true, active.key_id]);
  return erase;
}

interface StoredKey {
  readonly id: string;
  readonly keyId: string;
  readonly publicKey: Buffer;
  readonly privateKey: Buffer | null;
  readonly sealedWith: string | null;
  readonly keyIdInFiles: boolean;
  readonly isCurrent: boolean;
  readonly createdAt: string;
  readonly deactivatedAt: string | null;
  readonly retiredAt: string | null;
}

/** A row of either layout (before schema 5 a key had no key id, sealing or retirement), normalised. */
function storedKey(row: Row, current: boolean): StoredKey {
  const publicKey = asBytesOrNull(row.public_key)!;
  return {
    id: String(row.id),
    keyId: current ? String(row.key_id) : keyIdOf(publicKey),
    publicKey,
    privateKey: asBytesOrNull(row.private_key),
    sealedWith: current && row.sealed_with !== null ? String(row.sealed_with) : null,
    keyIdInFiles: current ? asBool(row.key_id_in_files) : false,
    isCurrent: asBool(row.is_current),
    createdAt: asIso(row.created_at),
    deactivatedAt: current ? asIsoOrNull(row.deactivated_at) : null,
    retiredAt: current ? asIsoOrNull(row.retired_at) : null,
  };
}

/** The keys of a signing_keys table's rows, as the plan sees them; `current` is false for a layout before schema 5. */
export function keySummariesOf(rows: readonly Row[], current: boolean): KeySummary[] {
  return rows.map((row) => summary(storedKey(row, current)));
}

/** Its state, as keys.ts describes a row. */
function summary(key: StoredKey): KeySummary {
  const state: SigningKeyState = key.isCurrent ? 'active' : key.retiredAt !== null ? 'retired' : key.deactivatedAt === null ? 'next' : 'verify-only';
  return { key_id: key.keyId, state, created_at: key.createdAt };
}
