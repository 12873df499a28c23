import { randomUUID } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { raiseEvent } from '../notifications/outbox.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { licenseNotFound } from '../licensing/licenses.js';
import { admitMachine, migrateMachine } from '../licensing/machines.js';
import { noteMachineRefusal, type MachineRefusal } from '../notifications/machine-refusals.js';
import type { Database, Engine, Queryable } from '../storage/types.js';
import { describe, toRfc3339Seconds, truncateToSeconds } from '../validate.js';
import { parseHardwareId, sealDecryptionKey } from './binding.js';
import { canonicalPayloadText, encodeSignedPayload, LICENSE_FILE_VERSION, LICENSE_FILE_VERSION_2, type LicenseFilePayload } from './format.js';
import type { ActivationRequest } from './activation-request.js';
import { checkRequestFor, parseCheckoutRequest, recordRequestNonce } from './request-checkout.js';
import { encodeMachineKey, machineKeyMembers, parseMachineKey } from './machine-key.js';
import { signingKeyMissing } from '../signing-keys/keys.js';
import { signerForKey, type LicenseSigner } from '../signing-keys/signer.js';
import { activeSigningKey, readCheckoutSource, type CheckoutSource } from './checkout-read.js';

export const MIN_TTL_DAYS = 1;
export const MAX_TTL_DAYS = 365;
const DAY_MS = 86_400_000;

export interface CheckoutRequest {
  /** Whole days, 1-365. `unknown` because it arrives from JSON and flags: the type is checked here. */
  readonly ttlDays: unknown;
  readonly hardwareId?: unknown;
  /**
   * An activation request file's text (activation-request.ts): the file is bound to its
   * hardware ID and carries its nonce (format version 2), and a 'machine-key' license's
   * decryption key is sealed to the request's machine_key. Not together with hardwareId.
   */
  readonly activationRequest?: unknown;
  /**
   * The machine's X25519 public key (unpadded base64url), as an activation request carries
   * it; a checkout with activationRequest takes the request's own. A license bound with
   * 'machine-key' is refused without one (MACHINE_KEY_REQUIRED); for a 'hardware-id'
   * license it is not used.
   */
  readonly machineKey?: unknown;
}

/** Spec section 2.3, with `license_file` being the file's own text (already Base64). */
export interface CheckoutResult {
  readonly license_file: string;
  readonly filename: string;
  readonly valid_until: string;
}

export interface CheckoutContext extends OperationContext {
  /** Written into the file as `issuer` (setting `issuer`). */
  readonly issuer: string;
  /** Days an activation request may be checked out after it was made (setting `offline.request_window_days`, default 7). */
  readonly requestWindowDays?: number;
}

export function parseTtlDays(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    const shown = typeof value === 'string' ? `the string ${describe(value)}` : describe(value);
    throw new LicenseServerError('INVALID_TTL_DAYS', `ttl_days must be an integer from ${MIN_TTL_DAYS} to ${MAX_TTL_DAYS}, got ${shown}`);
  }
  if (value < MIN_TTL_DAYS || value > MAX_TTL_DAYS) {
    throw new LicenseServerError('INVALID_TTL_DAYS', `ttl_days must be from ${MIN_TTL_DAYS} to ${MAX_TTL_DAYS}, got ${value}`);
  }
  return value;
}

/**
 * Turns a license into a signed `.lic` file (spec 4.2):
 * 1. valid_until = min(now + ttl_days, license.valid_until);
 * 2. a license with a decryption key needs a hardware ID (HARDWARE_ID_REQUIRED);
 * 3. license and customer must both be active;
 * 4. the checkout is audited, in the same transaction that reads the license;
 * 5. a bound file is counted as a machine of the license (machines.ts), which holds its seat
 *    until the file ends (or the checkout is voided, checkout-file.ts); a license with
 *    max_machines needs a hardware ID;
 * 6. the decryption key, if any, is sealed for the hardware ID.
 * With an activation request (request-checkout.ts) the hardware ID is the request's: it must
 * be for this license and within its window, its nonce is recorded (a replay is refused), and
 * the file is version 2 with `request_nonce`; without one the file is version 1, as before.
 * The file starts being valid at the license's own valid_from, not at checkout time, so a
 * client whose clock runs a little behind the server's can use a file at once.
 * Everything is checked before anything is written: a refused checkout leaves no trace.
 */
export async function checkoutLicense(
  db: Database,
  reference: string,
  request: CheckoutRequest,
  context: CheckoutContext,
): Promise<CheckoutResult> {
  return (await recordCheckout(db, reference, request, context)).result;
}

/** What identifies a recorded checkout, so that one whose file was never written can be voided. */
export interface CheckoutTicket {
  /** `checkout_id` in the checkout's audit entry. */
  readonly checkoutId: string;
  readonly licenseId: string;
  /** Normalised; undefined for an unbound file. */
  readonly hardwareId: string | undefined;
  readonly validUntil: string;
  /** The checkout recorded the machine: voided unused, it leaves none behind. */
  readonly machineCreated: boolean;
}

/** A checkout signed and recorded: the file, what voidCheckout takes, and the key that signed it. */
export interface RecordedCheckout {
  readonly result: CheckoutResult;
  readonly ticket: CheckoutTicket;
  /** Verifies the file read back, whatever key is active by then. */
  readonly publicKey: Uint8Array;
}

/** checkoutLicense, also answering the ticket that voidCheckout takes. */
export async function recordCheckout(
  db: Database,
  reference: string,
  request: CheckoutRequest,
  context: CheckoutContext,
): Promise<RecordedCheckout> {
  const ttlDays = parseTtlDays(request.ttlDays);
  const given = (value: unknown) => value !== undefined && value !== null;
  if (given(request.activationRequest) && given(request.hardwareId)) {
    throw new LicenseServerError('INVALID_INPUT', 'give a hardware_id or an activation request, not both: a request names its machine itself');
  }
  if (given(request.activationRequest) && given(request.machineKey)) {
    throw new LicenseServerError('INVALID_INPUT', 'give a machine key or an activation request, not both: a request carries its machine key itself');
  }
  const activation = given(request.activationRequest) ? parseCheckoutRequest(request.activationRequest) : undefined;
  const hardwareId = activation ? activation.hardware_id : given(request.hardwareId) ? parseHardwareId(request.hardwareId) : undefined;
  // The request's machine key is the machine-key binding's hook: the file is sealed to it.
  const machineKeyText = activation ? activation.machine_key : request.machineKey;
  const machineKey = given(machineKeyText) ? parseMachineKey(machineKeyText) : undefined;
  checkoutsInFlight += 1;
  try {
    return await recordAndSign(db, reference, ttlDays, hardwareId, activation, context, machineKey);
  } finally {
    checkoutsInFlight -= 1;
  }
}

/**
 * Checkouts of this process between their start and their signature. With others in flight
 * a signature is made on the thread pool, so the event loop serves them meanwhile; alone, the
 * hand-over would only add its latency, and it is made at once.
 */
let checkoutsInFlight = 0;

/**
 * The checkout's transaction, then its signature: the transaction (on SQLite, a group commit
 * that runs its members one after another) does not wait for the signature, and nothing it
 * records depends on it.
 */
async function recordAndSign(
  db: Database,
  reference: string,
  ttlDays: number,
  hardwareId: string | undefined,
  activation: ActivationRequest | undefined,
  context: CheckoutContext,
  machineKey: Uint8Array | undefined,
): Promise<RecordedCheckout> {
  // A refusal for the machine limit rolls the checkout back; it is counted afterwards.
  let limited: MachineRefusal | undefined;
  const issued = await db.transaction(async (tx) => {
    let source: CheckoutSource | undefined;
    let badReference: LicenseServerError | undefined;
    try {
      source = await readCheckoutSource(tx, db.engine, reference, hardwareId);
    } catch (error) {
      // Refused before any query ran: the signing key is checked first, as for any license.
      if (!(error instanceof LicenseServerError && error.code === 'INVALID_ID')) throw error;
      badReference = error;
    }
    try {
      // A store without a usable signing key says so first, whatever the license.
      const active = source ? (source.signingKeyId === undefined ? undefined : { keyId: source.signingKeyId, sealedWith: source.signingKeySealedWith }) : await activeSigningKey(tx);
      if (active === undefined) throw signingKeyMissing();
      const signer = await signerForKey(db, active.keyId, tx, active.sealedWith);
      if (badReference) throw badReference;
      if (!source) throw licenseNotFound(reference);
      try {
        return await issue(tx, db.engine, source, signer, { ttlDays, hardwareId, activation, machineKey }, context);
      } catch (error) {
        if (error instanceof LicenseServerError && error.code === 'MACHINE_LIMIT_EXCEEDED' && hardwareId !== undefined && source.license.max_machines !== null) {
          limited = { licenseId: source.license.id, hardwareId, maxMachines: source.license.max_machines };
        }
        throw error;
      }
    } finally {
      source?.decryptionKey?.fill(0);
    }
  }).catch(async (error: unknown) => {
    if (limited) await noteMachineRefusal(db, limited, context);
    throw error;
  });
  const canonical = canonicalPayloadText(issued.payload);
  const message = Buffer.from(canonical, 'utf8');
  const signature = checkoutsInFlight > 1 ? await issued.signer.signAsync(message) : issued.signer.sign(message);
  const result = {
    license_file: encodeSignedPayload(canonical, signature),
    filename: suggestedFilename(issued.payload),
    // The file's bytes keep whole seconds (docs/offline-license-format.md); the answer about
    // it uses the one form every other answer does.
    valid_until: new Date(issued.payload.valid_until).toISOString(),
  };
  const ticket = { checkoutId: issued.checkoutId, licenseId: issued.payload.license_id, hardwareId, validUntil: issued.payload.valid_until, machineCreated: issued.machineCreated };
  return { result, ticket, publicKey: issued.signer.publicKey };
}

/** A checkout recorded and ready to sign: its payload and the key to sign it with. */
interface IssuedPayload {
  readonly payload: LicenseFilePayload;
  readonly signer: LicenseSigner;
  readonly checkoutId: string;
  readonly machineCreated: boolean;
}

/** Checks the license read for the checkout, admits the machine, makes the payload and audits the checkout. */
async function issue(
  tx: Queryable,
  engine: Engine,
  { license, licenseKey, decryptionKey, machine }: CheckoutSource,
  signer: LicenseSigner,
  { ttlDays, hardwareId, activation, machineKey }: {
    readonly ttlDays: number;
    readonly hardwareId: string | undefined;
    readonly activation: ActivationRequest | undefined;
    readonly machineKey: Uint8Array | undefined;
  },
  context: CheckoutContext,
): Promise<IssuedPayload> {
  // A request for another license is refused as such, whatever the state of this one.
  if (activation) checkRequestFor(activation, { id: license.id, licenseKey }, now(context), context.requestWindowDays);
  if (!license.active) throw new LicenseServerError('LICENSE_INACTIVE', `license ${license.id} is not active`);
  if (!license.customer_active) {
    throw new LicenseServerError('CUSTOMER_INACTIVE', `customer ${license.customer_id} of license ${license.id} is not active`);
  }
  const issuedAt = truncateToSeconds(now(context));
  const licenseEnd = new Date(license.valid_until);
  if (licenseEnd.getTime() <= issuedAt.getTime()) {
    throw new LicenseServerError('LICENSE_EXPIRED', `license expired at ${licenseEnd.toISOString()}`, {
      hint: 'Extend or replace the license before checking it out.',
    });
  }
  // A machine-key license is sealed to the request's machine key (version 2), never to a bare hardware ID.
  const machineBound = machineKeyMembers(license, hardwareId, machineKey, decryptionKey);
  if (decryptionKey && hardwareId === undefined) {
    throw new LicenseServerError('HARDWARE_ID_REQUIRED', `license ${license.id} has a decryption key, so a hardware_id is required`);
  }
  if (license.max_machines !== null && hardwareId === undefined) {
    throw new LicenseServerError('HARDWARE_ID_REQUIRED', `license ${license.id} limits its machines to ${license.max_machines}, so a hardware_id is required`, {
      hint: 'A file without a hardware ID would run on any number of machines: pass --hardware-id.',
    });
  }
  const validUntil = new Date(Math.min(issuedAt.getTime() + ttlDays * DAY_MS, licenseEnd.getTime()));
  const validFrom = new Date(license.valid_from);
  if (validUntil.getTime() <= validFrom.getTime()) {
    throw new LicenseServerError(
      'LICENSE_NOT_YET_VALID',
      `license not yet valid: it starts at ${validFrom.toISOString()}, after a file of ${ttlDays} days would end`,
      { hint: 'Choose a longer --ttl-days, or check out closer to the license\'s start.' },
    );
  }
  if (activation) await recordRequestNonce(tx, activation, license.id, issuedAt, context.requestWindowDays);
  let machineCreated = false;
  if (hardwareId !== undefined) {
    // The machine holds its seat until the file ends, whatever happens online meanwhile.
    const described = activation
      ? { ...(activation.machine_name === '' ? {} : { name: activation.machine_name }), ...(activation.app_version === '' ? {} : { clientVersion: activation.app_version }) }
      : {};
    // A request from a machine that moved from hw1 to hw2 keeps its record and seat, as a validation does.
    const previousHardwareId = activation?.previous_hardware_id;
    const row = !machine && previousHardwareId !== undefined
      ? await migrateMachine(tx, engine, license.id, { hardwareId, previousHardwareId }, context)
      : machine;
    // The request's machine key is kept with the machine: online answers of a machine-key
    // license seal the decryption key to it (online-validation.ts), and to nothing else.
    const keyed = machineKey === undefined ? {} : { machineKey: encodeMachineKey(machineKey) };
    const admission = await admitMachine(tx, engine, license, { hardwareId, offlineUntil: validUntil, ...described, ...keyed }, context, { row, decryptionKey });
    if (!admission.admitted) {
      throw new LicenseServerError(admission.reason, `${admission.message} (license ${license.id})`);
    }
    machineCreated = admission.created;
  }
  const payload: LicenseFilePayload = {
    // Version 1 byte for byte for every file that needs nothing of version 2.
    version: activation || machineBound ? LICENSE_FILE_VERSION_2 : LICENSE_FILE_VERSION,
    license_id: license.id,
    license_key_prefix: license.key_prefix,
    customer_name: license.customer_name,
    license_type: license.type,
    valid_from: toRfc3339Seconds(validFrom),
    valid_until: toRfc3339Seconds(validUntil),
    hardware_id: hardwareId ?? '',
    entitlements: license.entitlements,
    ...(decryptionKey && hardwareId !== undefined && !machineBound ? { encrypted_key: sealDecryptionKey(decryptionKey, hardwareId, license.id) } : {}),
    issued_at: toRfc3339Seconds(issuedAt),
    issuer: context.issuer,
    ...(signer.keyIdInFiles ? { key_id: signer.keyId } : {}),
    ...(activation ? { request_nonce: activation.nonce } : {}),
    ...machineBound,
  };
  const checkoutId = randomUUID();
  await recordAudit(tx, context, {
    action: 'license.checked_out',
    entityType: 'license',
    entityId: license.id,
    details: {
      checkout_id: checkoutId,
      ttl_days: ttlDays,
      // The file's own times (whole seconds), in the form of every other time in the log.
      valid_until: new Date(payload.valid_until).toISOString(),
      issued_at: new Date(payload.issued_at).toISOString(),
      hardware_id: hardwareId ?? null,
      encrypted_key: payload.encrypted_key !== undefined,
      ...(payload.machine_key === undefined ? {} : { machine_key: payload.machine_key }),
      signing_key_id: signer.keyId,
      ...(activation ? { request_nonce: activation.nonce } : {}),
    },
  });
  await raiseEvent(tx, 'license.checked_out', {
    license_id: license.id,
    customer_id: license.customer_id,
    license_key_prefix: payload.license_key_prefix,
    valid_until: new Date(payload.valid_until).toISOString(),
    hardware_id: hardwareId ?? null,
    filename: suggestedFilename(payload),
    actor: context.actor,
  }, context);
  return { payload, signer, checkoutId, machineCreated };
}

/** `license-7KQ2-M9X-20261122T101500Z.lic`: the key prefix and issue time, safe on any file system. */
export function suggestedFilename(payload: Pick<LicenseFilePayload, 'license_key_prefix' | 'issued_at'>): string {
  const stamp = payload.issued_at.replace(/[-:]/g, '');
  const prefix = payload.license_key_prefix.replace(/[^A-Za-z0-9-]/g, '_');
  return `license-${prefix}-${stamp}.lic`;
}
