import { LicenseServerError } from '../errors.js';
import { N_ENC, N_PK, N_SK, N_T, openBase, publicKeyOf, sealBase } from '../crypto/hpke.js';
import { isSmallOrderPoint } from '../crypto/x25519-small-order.js';
import { decodeBase64Strict, encodeBase64 } from './base64.js';
import { DECRYPTION_KEY_LENGTH } from './binding.js';
import type { Binding } from '../licensing/license-terms.js';

/**
 * The machine-key binding of a license's decryption key (docs/offline-license-format.md,
 * section "The machine-key binding"): a `.lic` of version 2 names the machine's X25519
 * public key in `machine_key`, and `encrypted_key` is the key sealed to it with HPKE
 * (RFC 9180, mode_base, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / AES-256-GCM):
 *
 *   info          = UTF-8("license-server/v2/machine-key\n" + license_id + "\n" + hardware_id)
 *   enc, ct       = SealBase(pkR = machine_key, info, aad = "", pt = decryption key)
 *   encrypted_key = Base64(enc (32) || ct (32 + 16 tag))       -- 80 bytes, 108 characters
 *
 * Unlike the hardware-ID binding, nothing in the file opens it: only the machine's private
 * key, which never leaves the machine.
 */
export const MACHINE_KEY_INFO_PREFIX = 'license-server/v2/machine-key\n';
export const MACHINE_SEALED_KEY_LENGTH = N_ENC + DECRYPTION_KEY_LENGTH + N_T;
/** Unpadded base64url of 32 bytes. */
const MACHINE_KEY_TEXT = /^[A-Za-z0-9_-]{43}$/;


/** HPKE's info for one license and machine: the sealed key opens for this pair only. */
export function machineKeyInfo(licenseId: string, hardwareId: string): Uint8Array {
  return new TextEncoder().encode(`${MACHINE_KEY_INFO_PREFIX}${licenseId}\n${hardwareId}`);
}

/**
 * The 32 bytes of a `machine_key` text (unpadded base64url, 43 characters, canonical: the
 * two unused low bits of the last character are zero), or undefined when it is not one.
 */
export function decodeMachineKey(text: unknown): Uint8Array | undefined {
  if (typeof text !== 'string' || !MACHINE_KEY_TEXT.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.length !== N_PK || bytes.toString('base64url') !== text) return undefined;
  return new Uint8Array(bytes);
}

export function encodeMachineKey(publicKey: Uint8Array): string {
  if (publicKey.length !== N_PK) throw new TypeError('machine key: expected 32 bytes');
  return Buffer.from(publicKey).toString('base64url');
}

/**
 * A machine key given to a checkout (from an activation request): INVALID_INPUT unless it is
 * one, and a point of small order is none (nothing can be sealed to it).
 */
export function parseMachineKey(value: unknown): Uint8Array {
  const key = decodeMachineKey(value);
  if (!key) {
    throw new LicenseServerError('INVALID_INPUT', 'machine_key must be the unpadded base64url of a 32-byte X25519 public key (43 characters)');
  }
  if (isSmallOrderPoint(key)) throw new LicenseServerError('INVALID_INPUT', 'machine_key is an X25519 point of small order, not the public key of a key pair');
  return key;
}

/**
 * A machine's private key as a file holds it (`license verify --machine-private-key FILE`):
 * the unpadded base64url of its 32 bytes (43 characters), or 64 hex digits; surrounding
 * whitespace is ignored. INVALID_INPUT otherwise, never echoing the text (it is a secret).
 */
export function parseMachinePrivateKey(text: string, source: string): Uint8Array {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed) ? new Uint8Array(Buffer.from(trimmed, 'hex')) : decodeMachineKey(trimmed);
  if (!key) {
    throw new LicenseServerError('INVALID_INPUT', `${source} does not hold a machine private key: expected the unpadded base64url of 32 bytes (43 characters) or 64 hex digits`);
  }
  return key;
}

/**
 * Seals a decryption key to a machine's public key. The ephemeral key is fresh from the
 * CSPRNG; `ephemeralPrivateKey` exists for the known-answer vector only.
 */
export function sealForMachine(
  decryptionKey: Uint8Array,
  machineKey: Uint8Array,
  licenseId: string,
  hardwareId: string,
  ephemeralPrivateKey?: Uint8Array,
): string {
  if (decryptionKey.length !== DECRYPTION_KEY_LENGTH) throw new TypeError('decryption key: expected 32 bytes');
  const { enc, ciphertext } = sealBase(machineKey, machineKeyInfo(licenseId, hardwareId), new Uint8Array(0), decryptionKey, ephemeralPrivateKey);
  const sealed = new Uint8Array(MACHINE_SEALED_KEY_LENGTH);
  sealed.set(enc, 0);
  sealed.set(ciphertext, N_ENC);
  return encodeBase64(sealed);
}

/**
 * Opens the sealed key of a machine-key file with the machine's private key. Without one:
 * MACHINE_KEY_MISSING (the file alone does not open it; that is the point). With another
 * machine's key, or a file whose key was changed: DECRYPTION_FAILED.
 */
export function unsealForMachine(
  payload: { readonly encrypted_key: string; readonly machine_key: string; readonly license_id: string; readonly hardware_id: string },
  machinePrivateKey: Uint8Array | undefined,
): Uint8Array {
  if (machinePrivateKey === undefined) {
    throw new LicenseServerError('MACHINE_KEY_MISSING', 'failed to decrypt license key: it is sealed to the machine key of the file, and no machine private key was given');
  }
  if (machinePrivateKey.length !== N_SK) {
    throw new LicenseServerError('INVALID_INPUT', 'the machine private key must be 32 bytes (X25519)');
  }
  const machineKey = decodeMachineKey(payload.machine_key);
  const sealed = decodeBase64Strict(payload.encrypted_key);
  if (!machineKey || !sealed || sealed.length !== MACHINE_SEALED_KEY_LENGTH) {
    throw new LicenseServerError('DECRYPTION_FAILED', 'failed to decrypt license key: the sealed key has the wrong length');
  }
  if (!Buffer.from(publicKeyOf(machinePrivateKey)).equals(machineKey)) {
    throw new LicenseServerError('DECRYPTION_FAILED', 'failed to decrypt license key: the machine private key given is not the one of the file\'s machine_key');
  }
  try {
    const info = machineKeyInfo(payload.license_id, payload.hardware_id);
    return openBase(sealed.subarray(0, N_ENC), machinePrivateKey, info, new Uint8Array(0), sealed.subarray(N_ENC));
  } catch {
    throw new LicenseServerError('DECRYPTION_FAILED', 'failed to decrypt license key');
  }
}

/**
 * What a reader checks of `machine_key` (docs/offline-license-format.md section 3): the
 * message of a failure, or undefined. The length of `encrypted_key` that goes with it is
 * checked by the caller (MACHINE_SEALED_KEY_LENGTH).
 */
export function machineKeyMembersProblem(object: Record<string, unknown>, hardwareId: string): string | undefined {
  if (!('machine_key' in object)) return undefined;
  if (!decodeMachineKey(object.machine_key)) return '"machine_key" must be the unpadded base64url of 32 bytes (43 characters)';
  if (hardwareId === '') return '"machine_key" requires a "hardware_id"';
  return undefined;
}

/**
 * The members a checkout adds for the license's binding: none for 'hardware-id' (the file
 * stays version 1, whatever machine key the request carried), and for 'machine-key'
 * version 2 with `machine_key` and the decryption key, if any, sealed to it. A machine-key
 * license checked out without a machine key (a bare hardware ID) is MACHINE_KEY_REQUIRED.
 */
export function machineKeyMembers(
  license: { readonly id: string; readonly binding: Binding },
  hardwareId: string | undefined,
  machineKey: Uint8Array | undefined,
  decryptionKey: Uint8Array | null,
): { readonly version: 2; readonly machine_key: string; readonly encrypted_key?: string } | undefined {
  if (license.binding !== 'machine-key') return undefined;
  if (machineKey === undefined) {
    throw new LicenseServerError('MACHINE_KEY_REQUIRED', `license ${license.id} is bound with machine-key: it is checked out from the machine's activation request, which carries its machine_key, not with a bare hardware ID`);
  }
  if (hardwareId === undefined) {
    throw new LicenseServerError('HARDWARE_ID_REQUIRED', `license ${license.id} is bound with machine-key, so a hardware_id is required with the machine key`);
  }
  return {
    version: 2,
    machine_key: encodeMachineKey(machineKey),
    ...(decryptionKey ? { encrypted_key: sealForMachine(decryptionKey, machineKey, license.id, hardwareId) } : {}),
  };
}
