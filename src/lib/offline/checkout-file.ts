import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { isLicenseServerError, LicenseServerError } from '../errors.js';
import { lockLicense } from '../licensing/machines.js';
import type { Database, Queryable } from '../storage/types.js';
import { asIso, asIsoOrNull, asJson } from '../storage/values.js';
import { recordCheckout, type CheckoutContext, type CheckoutRequest, type CheckoutResult, type CheckoutTicket } from './checkout.js';
import { writeLicenseFile } from './write.js';

export interface FileTarget {
  /** An existing directory (the suggested file name is used), or the file to write. */
  readonly path: string;
  readonly directory: boolean;
  readonly overwrite: boolean;
}

export interface FileCheckoutResult extends CheckoutResult {
  /** Where the file was written. */
  readonly file: string;
}

/**
 * A checkout written to a file (`license checkout --out`), durably, read back and verified
 * (write.ts). A checkout whose file could not be written is voided, so that a file that
 * does not exist holds no seat and keeps no signing key from retirement: the machine's hold
 * goes back to what its other files need, and `license.checkout_voided` is recorded beside
 * the checkout. The error is the write's, saying the checkout was voided. When the file
 * may be on the device after all (written, then not read back, then not removable), or the
 * void itself fails (the database gone meanwhile), the checkout stands and the error says
 * so, with the command that frees its seat.
 */
export async function checkoutToFile(
  db: Database,
  reference: string,
  request: CheckoutRequest,
  target: FileTarget,
  context: CheckoutContext,
): Promise<FileCheckoutResult> {
  const { result, ticket, publicKey } = await recordCheckout(db, reference, request, context);
  const file = target.directory ? path.join(target.path, result.filename) : target.path;
  try {
    await writeLicenseFile(file, result.license_file, { publicKey, hardwareId: ticket.hardwareId, overwrite: target.overwrite, now: now(context) });
  } catch (error) {
    if (!isLicenseServerError(error) || !(error.code === 'FILE_WRITE_FAILED' || error.code === 'FILE_EXISTS')) throw error;
    if (await leftBehind(file, result.license_file)) {
      throw new LicenseServerError(error.code, `${error.message}; the file may be on the device all the same, so the checkout stands`, {
        hint: `If the file is lost, free its seat with \`license-server machine release <machine-id> --lost-file\`.`,
        cause: error,
      });
    }
    try {
      await voidCheckout(db, ticket, error.code, context);
    } catch (voidError) {
      // The write's failure is what the operator must hear; the seat is theirs to free.
      const why = isLicenseServerError(voidError) ? voidError.code : 'an internal error';
      throw new LicenseServerError(error.code, `${error.message}; the checkout could not be voided (${why}), so it still holds its seat`, {
        hint: 'Free the seat with `license-server machine release <machine-id> --lost-file` (`machine list --license ID` shows the machine).',
        cause: error,
      });
    }
    throw new LicenseServerError(error.code, `${error.message}; the checkout was voided and holds no seat`, { cause: error });
  }
  return { ...result, file };
}

/** True when `file` holds exactly the checked-out text and cannot be removed. */
async function leftBehind(file: string, text: string): Promise<boolean> {
  let found: Buffer;
  try {
    found = await readFile(file);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ENOENT' && (error as NodeJS.ErrnoException).code !== 'ENOTDIR';
  }
  // Another file (one that --force did not get to replace) is not this checkout's.
  if (!found.equals(Buffer.from(text, 'utf8'))) return false;
  try {
    await rm(file);
    return false;
  } catch {
    return true;
  }
}

/**
 * Voids a checkout whose file was never written. Under the license's lock, the machine's
 * offline hold goes back to the end of its newest other file that is still valid, voided
 * or declared lost files not counted (offlineHoldWithout); a machine the checkout recorded,
 * and that nothing else has used since, is removed (on a node-locked license an active
 * machine holds a seat for good, and a retry for the same hardware ID must be admitted as
 * new). `license.checkout_voided` records the checkout's `checkout_id`, which also takes the
 * file out of the signing key's retirement check (rotation.ts signedUntil).
 */
export async function voidCheckout(db: Database, ticket: CheckoutTicket, reason: string, context: OperationContext): Promise<void> {
  await db.transaction(async (tx) => {
    await lockLicense(tx, db.engine, ticket.licenseId);
    const at = now(context);
    let offlineUntil: string | null = null;
    let machineRemoved: string | null = null;
    if (ticket.hardwareId !== undefined) {
      const machine = (await tx.query(
        'SELECT id, offline_until, lease_expires_at, first_seen, last_seen FROM machines WHERE license_id = ? AND hardware_id = ?',
        [ticket.licenseId, ticket.hardwareId],
      ))[0];
      if (machine) {
        const id = String(machine.id);
        offlineUntil = asIsoOrNull(machine.offline_until);
        // A later file of the machine holds it at least as long: then nothing changes.
        if (offlineUntil !== null && Date.parse(offlineUntil) === Date.parse(ticket.validUntil)) {
          const rest = await offlineHoldWithout(tx, ticket, id, at);
          offlineUntil = rest === null ? null : new Date(rest).toISOString();
          const unused = ticket.machineCreated && rest === null && asIsoOrNull(machine.lease_expires_at) === null
            && Date.parse(asIso(machine.last_seen)) === Date.parse(asIso(machine.first_seen));
          if (unused) {
            await tx.execute('DELETE FROM machines WHERE id = ?', [id]);
            machineRemoved = id;
          } else {
            await tx.execute('UPDATE machines SET offline_until = ? WHERE id = ?', [offlineUntil, id]);
          }
        }
      }
    }
    await recordAudit(tx, context, {
      action: 'license.checkout_voided',
      entityType: 'license',
      entityId: ticket.licenseId,
      details: {
        checkout_id: ticket.checkoutId, hardware_id: ticket.hardwareId ?? null, valid_until: new Date(ticket.validUntil).toISOString(), reason,
        offline_until: offlineUntil, machine_removed: machineRemoved,
      },
    });
  });
}

/** Files older than this have ended: no checkout is valid for more than 365 days. */
const LONGEST_FILE_MS = 366 * 86_400_000;

/**
 * The end of the newest file still valid for the ticket's machine, other than the ticket's
 * own, as the audit log records checkouts: not voided, and checked out after the last time
 * its files were declared lost. Null when none is.
 */
async function offlineHoldWithout(tx: Queryable, ticket: CheckoutTicket, machineId: string, at: Date): Promise<number | null> {
  const lost = await tx.query(
    "SELECT max(id) AS id FROM audit_log WHERE entity_type = 'machine' AND entity_id = ? AND action = 'machine.offline_files_released'",
    [machineId],
  );
  const lostAt = lost[0]?.id === null || lost[0]?.id === undefined ? 0 : Number(lost[0].id);
  const entries = await tx.query(
    `SELECT id, action, details FROM audit_log WHERE entity_type = 'license' AND entity_id = ?
     AND action IN ('license.checked_out', 'license.checkout_voided') AND occurred_at >= ? ORDER BY id`,
    [ticket.licenseId, new Date(at.getTime() - LONGEST_FILE_MS).toISOString()],
  );
  const voided = new Set(entries.filter((entry) => entry.action === 'license.checkout_voided').map((entry) => asJson(entry.details).checkout_id));
  voided.add(ticket.checkoutId);
  let newest: number | null = null;
  for (const entry of entries) {
    const details = asJson(entry.action === 'license.checked_out' ? entry.details : null);
    if (entry.action !== 'license.checked_out' || Number(entry.id) <= lostAt || details.hardware_id !== ticket.hardwareId) continue;
    if (details.checkout_id !== undefined && voided.has(details.checkout_id)) continue;
    const end = Date.parse(String(details.valid_until));
    if (end > at.getTime() && (newest === null || end > newest)) newest = end;
  }
  return newest;
}
