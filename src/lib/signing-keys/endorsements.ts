import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { publicKeyFromPem } from '../crypto/ed25519-pem.js';
import { endorsementStatement, type Endorsement } from '../crypto/key-endorsement.js';
import { isLicenseServerError } from '../errors.js';
import { signEd25519 } from '../offline/ed25519.js';
import type { Database, Queryable } from '../storage/types.js';
import { asBytesOrNull } from '../storage/values.js';
import { listVerifyingKeys, loadKeyPair } from './keys.js';

/**
 * Endorses what is not endorsed yet (docs/public-keys.md, "Endorsements"): every key that
 * still holds its private half (the active key, a next key, verify-only keys) signs the
 * statement over every other key that still verifies and that it has not signed over. Run
 * inside the transaction that makes a key (`rotate --prepare`, `rotate`), and when a store
 * is opened to serve (`init`, `serve`, after a restore), which also endorses the keys of a
 * store from before endorsements. Ed25519 is deterministic, so two processes racing here
 * write the same row and the second insert does nothing. A key whose private half this
 * process cannot open (sealed, without the key-encryption key) signs nothing here; the next
 * process that can open it does (nor does a damaged one). Each endorsement added is audited
 * as `signing_key.endorsed` (the endorsed key; the signer's key id in the details) with its
 * row; the losing insert of a race adds nothing and audits nothing. Returns how many were added.
 */
export async function endorseKeys(db: Database, context: OperationContext, tx: Queryable = db): Promise<number> {
  const keys = await listVerifyingKeys(tx);
  if (keys.length < 2) return 0;
  const held = await tx.query('SELECT key_id FROM signing_keys WHERE private_key IS NOT NULL AND retired_at IS NULL');
  const existing = new Set((await tx.query('SELECT key_id, signer_key_id FROM signing_key_endorsements')).map((row) => `${String(row.key_id)} ${String(row.signer_key_id)}`));
  const at = now(context).toISOString();
  let added = 0;
  for (const signerKeyId of held.map((row) => String(row.key_id))) {
    const subjects = keys.filter((key) => key.key_id !== signerKeyId && !existing.has(`${key.key_id} ${signerKeyId}`));
    if (subjects.length === 0) continue;
    let secretKey: Uint8Array;
    try {
      secretKey = (await loadKeyPair(db, signerKeyId, tx)).secretKey;
    } catch (error) {
      // Sealed without the key-encryption key here, or damaged: another process, or none, endorses with it.
      if (isLicenseServerError(error)) continue;
      throw error;
    }
    try {
      for (const subject of subjects) {
        const signature = signEd25519(endorsementStatement(publicKeyFromPem(subject.public_key_pem)), secretKey);
        // The row and its audit entry together: in the caller's transaction, or one of their own.
        const endorse = async (writer: Queryable): Promise<boolean> => {
          const inserted = await writer.query(
            'INSERT INTO signing_key_endorsements (key_id, signer_key_id, signature, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING key_id',
            [subject.key_id, signerKeyId, signature, at],
          );
          if (inserted.length === 0) return false;
          await recordAudit(writer, context, {
            action: 'signing_key.endorsed',
            entityType: 'signing_key',
            entityId: subject.id,
            details: { key_id: subject.key_id, signer_key_id: signerKeyId },
          });
          return true;
        };
        if (await (tx === db ? db.transaction(endorse) : endorse(tx))) added += 1;
      }
    } finally {
      secretKey.fill(0);
    }
  }
  return added;
}

/** The endorsements of each key, by the endorsed key's id, ordered by signer key id. */
export async function listEndorsements(db: Queryable): Promise<Map<string, Endorsement[]>> {
  const rows = await db.query('SELECT key_id, signer_key_id, signature FROM signing_key_endorsements ORDER BY key_id, signer_key_id');
  const byKey = new Map<string, Endorsement[]>();
  for (const row of rows) {
    const list = byKey.get(String(row.key_id)) ?? [];
    list.push({ signerKeyId: String(row.signer_key_id), signature: new Uint8Array(asBytesOrNull(row.signature)!) });
    byKey.set(String(row.key_id), list);
  }
  return byKey;
}
