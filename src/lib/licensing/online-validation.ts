import { randomUUID } from 'node:crypto';
import { now, type OperationContext } from '../context.js';
import { isLicenseServerError, LicenseServerError } from '../errors.js';
import { encodeGraceToken } from './grace-token.js';
import { getLicense, getLicenseWithMachine, type License } from './licenses.js';
import { parseHardwareId, sealDecryptionKey } from '../offline/binding.js';
import { isSmallOrderPoint } from '../crypto/x25519-small-order.js';
import { decodeMachineKey, sealForMachine } from '../offline/machine-key.js';
import { admitMachine, migrateMachine, releaseLease } from './machines.js';
import { noteMachineRefusal, type MachineRefusal } from '../notifications/machine-refusals.js';
import type { LicenseFileEntitlement } from '../offline/format.js';
import { getSigner } from '../signing-keys/signer.js';
import type { Database, Queryable } from '../storage/types.js';
import { toRfc3339Seconds } from '../validate.js';

export const INVALID_REASONS = [
  'LICENSE_NOT_FOUND', 'LICENSE_INACTIVE', 'CUSTOMER_INACTIVE', 'LICENSE_EXPIRED', 'LICENSE_NOT_YET_VALID',
  'MACHINE_LIMIT_EXCEEDED', 'MACHINE_DEACTIVATED',
] as const;
export type InvalidReason = (typeof INVALID_REASONS)[number];

export interface ValidAnswer {
  readonly valid: true;
  readonly license_id: string;
  readonly license_key_prefix: string;
  readonly license_type: string;
  readonly valid_from: string;
  readonly valid_until: string;
  readonly entitlements: readonly LicenseFileEntitlement[];
  /**
   * The decryption key sealed exactly as in a .lic file: for the hardware ID (section 7), or,
   * on a machine-key license, to the machine's key (section 14). A machine-key license whose
   * machine has no key on record (never checked out from a request) gets none.
   */
  readonly encrypted_key?: string;
  /** Machine-key licenses: the machine key `encrypted_key` is sealed to. */
  readonly machine_key?: string;
  readonly grace_token: string;
  readonly grace_expires_at: string;
  /** The machine (license, hardware ID) this validation was counted for. */
  readonly machine_id: string;
  /** Floating licenses only: the seat is this machine's until then unless validated again. */
  readonly lease_expires_at?: string;
  readonly server_time: string;
}

/** An authoritative "no": the client must not fall back to its offline tiers. */
export interface InvalidAnswer {
  readonly valid: false;
  readonly reason: InvalidReason;
  readonly message: string;
  readonly server_time: string;
}

export type ValidationAnswer = ValidAnswer | InvalidAnswer;

export interface OnlineContext extends OperationContext {
  readonly issuer: string;
  readonly graceHours: number;
}

export interface ValidationRequest {
  readonly license_key: unknown;
  readonly hardware_id: unknown;
  readonly version: unknown;
  /** Optional: a name for the machine, shown in `machine list`. */
  readonly machine_name?: unknown;
  /**
   * Optional: the `hw1-` ID this machine used before it derived `hardware_id` (`hw2-`): its
   * machine record, and so its seat, moves to the new ID (migrateMachine).
   */
  readonly previous_hardware_id?: unknown;
}

/**
 * Online validation (spec section 1, tier 1). A malformed key and an unknown key get the
 * same answer, so the endpoint tells a guesser nothing about the key format.
 */
export async function validateOnline(db: Database, request: ValidationRequest, context: OnlineContext): Promise<ValidationAnswer> {
  const hardwareId = parseHardwareId(request.hardware_id);
  const version = parseVersion(request.version);
  const machineName = request.machine_name === undefined ? undefined : parseMachineName(request.machine_name);
  const previousHardwareId = request.previous_hardware_id === undefined ? undefined : parseHardwareId(request.previous_hardware_id, 'previous_hardware_id');
  if (typeof request.license_key !== 'string') {
    throw new LicenseServerError('INVALID_INPUT', 'license_key must be a string');
  }
  const at = now(context);
  const serverTime = at.toISOString();
  const signer = await getSigner(db);
  // One transaction: the license, its machine and its key are read and the seat taken as one
  // step, and under load the work of many validations shares one lock round (SqliteDatabase).
  const outcome = await db.transaction(async (tx) => {
    const key = request.license_key as string;
    // An id is not a key: looking one up by id here would make ids guessable credentials.
    const found = looksLikeId(key) ? undefined : await getLicenseWithMachine(tx, key, hardwareId);
    if (!found) return { refusal: { reason: 'LICENSE_NOT_FOUND' as const, message: 'no license has this key' } };
    const { license } = found;
    const probe = { row: found.machine, decryptionKey: license.has_decryption_key ? found.decryptionKey : null };
    const unusable = checkUsable(license, at);
    if (unusable) {
      probe.decryptionKey?.fill(0);
      return { refusal: unusable };
    }
    // A machine that moved from hw1 to hw2 keeps its record and seat (docs/client.md).
    if (!probe.row && previousHardwareId !== undefined && previousHardwareId !== hardwareId) {
      probe.row = await migrateMachine(tx, db.engine, license.id, { hardwareId, previousHardwareId }, context);
    }
    const admission = await admitMachine(tx, db.engine, license, {
      hardwareId,
      clientVersion: version,
      ...(machineName === undefined ? {} : { name: machineName }),
      leaseUntil: graceEnd(license, at, context.graceHours),
    }, context, probe);
    if (!admission.admitted) {
      probe.decryptionKey?.fill(0);
      const limited: MachineRefusal | undefined = admission.reason === 'MACHINE_LIMIT_EXCEEDED'
        ? { licenseId: license.id, hardwareId, maxMachines: license.max_machines! }
        : undefined;
      return { refusal: { reason: admission.reason, message: admission.message }, limited };
    }
    return { license, admission, decryptionKey: probe.decryptionKey };
  });
  if (!outcome.license) {
    if ('limited' in outcome && outcome.limited) await noteMachineRefusal(db, outcome.limited, context);
    return { valid: false, ...outcome.refusal, server_time: serverTime };
  }
  const { license, admission, decryptionKey } = outcome;

  const entitlements = license.entitlements.map(({ code, name, usage_limit }) => ({ code, name, usage_limit }));
  const issuedAt = Math.floor(at.getTime() / 1000);
  const expires = Math.floor(admission.leaseExpiresAt!.getTime() / 1000);
  const graceToken = encodeGraceToken(
    {
      iss: context.issuer,
      sub: license.id,
      iat: issuedAt,
      nbf: issuedAt,
      exp: expires,
      jti: randomUUID(),
      license_id: license.id,
      license_key_prefix: license.key_prefix,
      license_type: license.type,
      hardware_id: hardwareId,
      license_valid_until: toRfc3339Seconds(new Date(license.valid_until)),
      entitlements,
    },
    signer.keyId,
    (message) => signer.sign(message),
  );
  // The answer's times are the API's one form, to the millisecond; only the token's claims
  // keep the whole seconds docs/grace-token.md fixes.
  const answer: ValidAnswer = {
    valid: true,
    license_id: license.id,
    license_key_prefix: license.key_prefix,
    license_type: license.type,
    valid_from: license.valid_from,
    valid_until: license.valid_until,
    entitlements,
    ...(decryptionKey ? sealedKeyMembers(decryptionKey, license, hardwareId, admission.machine.machine_key) : {}),
    grace_token: graceToken,
    grace_expires_at: new Date(expires * 1000).toISOString(),
    machine_id: admission.machine.id,
    ...(license.floating ? { lease_expires_at: new Date(expires * 1000).toISOString() } : {}),
    server_time: serverTime,
  };
  decryptionKey?.fill(0);
  return answer;
}

/**
 * The decryption key as the online answer carries it. A machine-key license's key is sealed
 * only to the machine key recorded from the machine's activation request (checkout): sealing
 * it the hardware-ID way, or to a key the caller sent, would hand it to anyone holding the
 * license key. Without a recorded key the answer carries none; the machine has its file's.
 */
function sealedKeyMembers(
  decryptionKey: Uint8Array,
  license: License,
  hardwareId: string,
  machineKeyText: string | null,
): { encrypted_key: string; machine_key?: string } | Record<string, never> {
  if (license.binding !== 'machine-key') return { encrypted_key: sealDecryptionKey(decryptionKey, hardwareId, license.id) };
  const machineKey = decodeMachineKey(machineKeyText);
  // A key of small order, which a release before the request reader refused it may have recorded, seals nothing.
  if (!machineKey || machineKeyText === null || isSmallOrderPoint(machineKey)) return {};
  return { encrypted_key: sealForMachine(decryptionKey, machineKey, license.id, hardwareId), machine_key: machineKeyText };
}

/**
 * Where the grace token issued now ends, to the second: `grace.hours` on, never past the
 * license's end, and on a floating license never past its lease (the token is the lease).
 */
function graceEnd(license: License, at: Date, graceHours: number): Date {
  const hours = license.floating ? Math.min(graceHours, license.lease_hours) : graceHours;
  const end = Math.min(Math.floor(at.getTime() / 1000) + hours * 3600, Math.floor(Date.parse(license.valid_until) / 1000));
  return new Date(end * 1000);
}

export interface ReleaseAnswer {
  /** True when this machine held a running lease: it is given up, and not renewed. */
  readonly released: boolean;
  /** When the machine's seat is free (RFC 3339), unless it validates again first; null when it holds none. */
  readonly seat_free_at: string | null;
  readonly message: string;
  readonly server_time: string;
}

/**
 * A floating seat given back (the client's `release()`). The seat is free when nothing
 * signed for the machine can still be used: the grace token it was last given ends with its
 * lease, so the seat frees at the lease's end (or an offline file's, when later), which
 * `seat_free_at` says; the client library has deleted its token, but a copy would work until
 * then. Asking twice answers the same; a machine without a lease answers released: false; a
 * license that is not floating keeps its machines' seats until an operator deactivates them.
 * A malformed or unknown key answers LICENSE_NOT_FOUND, as validation does. Nothing is
 * written, so a release takes no lock and races nothing.
 */
export async function releaseSeat(db: Database, request: { license_key: unknown; hardware_id: unknown }, context: OperationContext): Promise<ReleaseAnswer> {
  const hardwareId = parseHardwareId(request.hardware_id);
  if (typeof request.license_key !== 'string') throw new LicenseServerError('INVALID_INPUT', 'license_key must be a string');
  const serverTime = now(context).toISOString();
  const license = await findLicenseByKey(db, request.license_key);
  if (!license) throw new LicenseServerError('LICENSE_NOT_FOUND', 'no license has this key');
  if (!license.floating) {
    return { released: false, seat_free_at: null, message: 'the license is not floating: a machine keeps its seat until it is deactivated', server_time: serverTime };
  }
  const { released, seatFreeAt, heldByFile } = await releaseLease(db, license, hardwareId, context);
  const freeAt = seatFreeAt === null ? null : seatFreeAt.toISOString();
  const message = freeAt === null
    ? 'this machine held no lease'
    : heldByFile
      ? `${released ? 'the lease is given up, but ' : 'this machine held no lease; '}an offline file checked out for it holds the seat until ${freeAt}`
      : `the seat is free at ${freeAt}, when the grace token given to this machine ends`;
  return { released, seat_free_at: freeAt, message, server_time: serverTime };
}

/** The license with this key, or undefined for a malformed or unknown one. */
function looksLikeId(key: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(key) || key.length > 64;
}

export async function findLicenseByKey(db: Queryable, key: string): Promise<License | undefined> {
  // An id is not a key: looking one up by id here would make ids guessable credentials.
  if (looksLikeId(key)) return undefined;
  try {
    return await getLicense(db, key, { seats: false });
  } catch (error) {
    if (isLicenseServerError(error) && (error.code === 'LICENSE_NOT_FOUND' || error.code === 'INVALID_ID')) return undefined;
    throw error;
  }
}

/** Why a license cannot be used now, or undefined when it can. */
export function checkUsable(license: License, at: Date): { reason: InvalidReason; message: string } | undefined {
  if (!license.active) return { reason: 'LICENSE_INACTIVE', message: 'the license is not active' };
  if (!license.customer_active) return { reason: 'CUSTOMER_INACTIVE', message: 'the customer is not active' };
  if (at.getTime() < Date.parse(license.valid_from)) {
    return { reason: 'LICENSE_NOT_YET_VALID', message: `the license starts at ${license.valid_from}` };
  }
  if (at.getTime() >= Date.parse(license.valid_until)) {
    return { reason: 'LICENSE_EXPIRED', message: `the license expired at ${license.valid_until}` };
  }
  return undefined;
}

function parseMachineName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 200 || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new LicenseServerError('INVALID_INPUT', 'machine_name must be a string of 1-200 characters without control characters');
  }
  return name.normalize('NFC');
}

function parseVersion(version: unknown): string {
  if (typeof version !== 'string' || version.length === 0 || version.length > 100 || /[\u0000-\u001f\u007f]/.test(version)) {
    throw new LicenseServerError('INVALID_INPUT', 'version must be the application version, a string of 1-100 characters');
  }
  return version;
}
