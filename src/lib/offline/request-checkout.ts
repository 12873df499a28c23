import { timingSafeEqual } from 'node:crypto';
import { LicenseServerError } from '../errors.js';
import type { Queryable } from '../storage/types.js';
import { asIso } from '../storage/values.js';
import { activationRequestDigest, decodeActivationRequest, licenseKeyDigest, type ActivationRequest } from './activation-request.js';

/**
 * A checkout answering an activation request (`license checkout --request`, the API's
 * checkout with `request`): the request's checks, and its nonce's record
 * (activation_requests, migrations 11 and 14).
 */

/** How long a request may be used after it was made, by default (offline.request_window_days); its nonce is kept as long. */
export const DEFAULT_REQUEST_WINDOW_DAYS = 7;
const DAY_MS = 86_400_000;
/** A request made on a machine whose clock runs ahead by up to this much is taken. */
export const REQUEST_FUTURE_TOLERANCE_MS = 5 * 60_000;

/** The request text of a checkout, read strictly; a text that is not one is ACTIVATION_REQUEST_MALFORMED. */
export function parseCheckoutRequest(value: unknown): ActivationRequest {
  if (typeof value !== 'string') {
    throw new LicenseServerError('ACTIVATION_REQUEST_MALFORMED', `activation request is malformed: it must be the request file's text, got ${value === null ? 'null' : typeof value}`);
  }
  return decodeActivationRequest(value);
}

/**
 * The request is for this license (its digest is of this license's key) and within its
 * window. Checked before anything of the license itself, so that a request for another
 * license is refused as such, whatever the state of this one.
 */
export function checkRequestFor(
  request: ActivationRequest,
  license: { readonly id: string; readonly licenseKey: string },
  at: Date,
  windowDays: number = DEFAULT_REQUEST_WINDOW_DAYS,
): void {
  const expected = Buffer.from(licenseKeyDigest(license.licenseKey), 'utf8');
  const given = Buffer.from(request.license_key_digest, 'utf8');
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw new LicenseServerError(
      'ACTIVATION_REQUEST_WRONG_LICENSE',
      `the activation request is for another license (key ${request.license_key_prefix}...), not license ${license.id}`,
    );
  }
  const created = Date.parse(request.created_at);
  if (created < at.getTime() - windowDays * DAY_MS) {
    throw new LicenseServerError(
      'ACTIVATION_REQUEST_EXPIRED',
      `the activation request was made at ${request.created_at}, more than ${windowDays} day${windowDays === 1 ? '' : 's'} ago`,
    );
  }
  if (created > at.getTime() + REQUEST_FUTURE_TOLERANCE_MS) {
    throw new LicenseServerError(
      'ACTIVATION_REQUEST_EXPIRED',
      `the activation request is dated ${request.created_at}, more than ${REQUEST_FUTURE_TOLERANCE_MS / 60_000} minutes ahead of the server's clock`,
      { hint: 'Check the clock of the machine that made the request, then make a new request there.' },
    );
  }
}

/**
 * Records the request's nonce for this license and machine, with the digest of the whole
 * request, inside the checkout's transaction (a refused checkout records nothing). The same
 * request again within its window answers again, for the same machine and seat: an operator
 * whose USB write failed redoes the checkout. A nonce already used with any member changed
 * is a request that was altered or copied: ACTIVATION_REQUEST_REPLAYED, naming another
 * license, hardware ID or date when that is what changed. So a copy of machine C's request
 * with another machine_key cannot get a file sealed to that key, nor replace the key recorded
 * for C. Rows past the window are pruned here: a request that old is refused by its date
 * before its nonce is looked up.
 */
export async function recordRequestNonce(
  tx: Queryable,
  request: ActivationRequest,
  licenseId: string,
  at: Date,
  windowDays: number = DEFAULT_REQUEST_WINDOW_DAYS,
): Promise<void> {
  const stamp = at.toISOString();
  const digest = activationRequestDigest(request);
  await tx.execute('DELETE FROM activation_requests WHERE created_at < ?', [new Date(at.getTime() - windowDays * DAY_MS - REQUEST_FUTURE_TOLERANCE_MS).toISOString()]);
  await tx.execute(
    `INSERT INTO activation_requests (nonce, license_id, hardware_id, created_at, used_at, request_digest) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (nonce) DO NOTHING`,
    [request.nonce, licenseId, request.hardware_id, new Date(request.created_at).toISOString(), stamp, digest],
  );
  const row = (await tx.query('SELECT license_id, hardware_id, created_at, request_digest FROM activation_requests WHERE nonce = ?', [request.nonce]))[0];
  if (!row) throw new Error('activation_requests: the nonce just recorded is not there');
  const sameLicense = String(row.license_id).toLowerCase() === licenseId.toLowerCase();
  if (!sameLicense || String(row.hardware_id) !== request.hardware_id) {
    throw replayed(request, `for ${sameLicense ? 'another hardware ID' : 'another license'}`);
  }
  if (Date.parse(asIso(row.created_at)) !== Date.parse(request.created_at)) throw replayed(request, 'by a request made at another time');
  if (row.request_digest === null || row.request_digest === undefined) {
    await checkUndigestedRow(tx, request, licenseId);
  } else if (String(row.request_digest) !== digest) {
    throw replayed(request, 'by a request with other contents');
  }
  await tx.execute('UPDATE activation_requests SET used_at = ?, request_digest = ? WHERE nonce = ?', [stamp, digest, request.nonce]);
}

/**
 * A nonce recorded before its request's digest was (schema 13 and older, or carried by a
 * restore into a backup of then) names only its license, hardware ID and date. It is
 * answered again only for a request whose machine_key is the one recorded for its machine:
 * that request's, unless a newer request of the machine was checked out since. A copy with
 * another key, or one whose machine is no longer recorded (a restore to an older backup),
 * cannot be told from an altered request and is refused. Answered, the row keeps this
 * request's digest from then on.
 */
async function checkUndigestedRow(tx: Queryable, request: ActivationRequest, licenseId: string): Promise<void> {
  const [machine] = await tx.query('SELECT machine_key FROM machines WHERE license_id = ? AND hardware_id = ?', [licenseId, request.hardware_id]);
  if (machine?.machine_key === null || machine?.machine_key === undefined || String(machine.machine_key) !== request.machine_key) {
    throw replayed(request, 'by a request recorded without its digest (before schema 14), and this one\'s machine_key is not the key recorded for its machine');
  }
}

function replayed(request: ActivationRequest, how: string): LicenseServerError {
  return new LicenseServerError('ACTIVATION_REQUEST_REPLAYED', `the activation request's nonce ${request.nonce} was already used ${how}`, {
    hint: 'Make a new request on the machine (`license-server-client request`) and check that one out.',
  });
}
