import { describeUnknownKey, keysFor, parseKeySet, type KeySet, type KeySetInput } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import { unsealDecryptionKey } from './binding.js';
import { verifyEd25519 } from './ed25519.js';
import { decodeLicenseFile, type DecodedLicenseFile, type LicenseFilePayload } from './format.js';
import { unsealForMachine } from './machine-key.js';

export interface VerifyOptions {
  /**
   * The server's public keys: 32 raw bytes, PEM with one or more blocks (`signing-key show
   * --all`), a list of those, or a parsed key set. A file naming a `key_id` is checked with
   * that key only; one without is tried against each key.
   */
  readonly publicKey: KeySetInput | KeySet;
  /**
   * This machine's hardware ID. Without it the binding of a bound file is left unchecked,
   * except for a file that carries `encrypted_key`: then the check is mandatory (spec
   * section 8) and the file is refused with HARDWARE_ID_REQUIRED unless `skipHardwareCheck`.
   */
  readonly hardwareId?: string;
  /** The caller's explicit choice to check only the signature and window of a file with `encrypted_key`. */
  readonly skipHardwareCheck?: boolean;
  /**
   * The machine's X25519 private key (32 bytes), which opens the decryption key of a file
   * with `machine_key` (machine-key binding). Without it such a file's key is not opened:
   * MACHINE_KEY_MISSING.
   */
  readonly machinePrivateKey?: Uint8Array;
  /**
   * The server reading back a file it wrote for a machine-key license: it holds no machine
   * private key, so everything is checked but the sealed key is left sealed.
   */
  readonly leaveMachineKeySealed?: boolean;
  readonly now?: Date;
}

export interface VerifiedLicenseFile {
  readonly payload: LicenseFilePayload;
  /** True when the file is unbound, or bound to the hardware ID given. */
  readonly hardwareChecked: boolean;
  /** The license's decryption key, unsealed for the given hardware ID, when the file carries one. */
  readonly decryptionKey?: Uint8Array;
}

/**
 * The offline check, in the order of docs/offline-license-format.md section "Verifying":
 * decode strictly, check the signature, the validity window, then the hardware binding
 * (mandatory when the file carries `encrypted_key`).
 * Each failure throws a LicenseServerError whose message starts with the text of spec
 * section 7 ("signature verification failed", "license expired", ...).
 */
export function verifyLicenseFile(file: string | Uint8Array, options: VerifyOptions): VerifiedLicenseFile {
  const decoded = decodeLicenseFile(file);
  const { payload } = decoded;
  const status = checkSignature(decoded, asKeySet(options.publicKey));
  if (status !== 'valid') {
    throw new LicenseServerError('SIGNATURE_INVALID', `signature verification failed${status === 'invalid' ? '' : `: ${status.unknown}`}`);
  }
  checkValidityWindow(payload, options.now ?? new Date());
  if (payload.hardware_id === '') return { payload, hardwareChecked: true };
  if (options.hardwareId === undefined) {
    if (payload.encrypted_key !== undefined && options.skipHardwareCheck !== true) {
      throw new LicenseServerError('HARDWARE_ID_REQUIRED', `hardware ID required: the file is bound to ${JSON.stringify(payload.hardware_id)} and carries a decryption key sealed to it, so its binding must be checked`, {
        hint: 'Pass --hardware-id with this machine\'s hardware ID, or --skip-hardware-check to check only the signature and the validity window.',
      });
    }
    return { payload, hardwareChecked: false };
  }
  // One machine, whichever Unicode form its ID arrives in (files from this server carry NFC).
  if (options.hardwareId.normalize('NFC') !== payload.hardware_id.normalize('NFC')) {
    const detail = payload.encrypted_key === undefined ? '' : ': failed to decrypt license key';
    throw new LicenseServerError('HARDWARE_MISMATCH', `hardware ID mismatch${detail}`);
  }
  if (payload.encrypted_key === undefined) return { payload, hardwareChecked: true };
  if (payload.machine_key !== undefined && options.leaveMachineKeySealed === true) return { payload, hardwareChecked: true };
  const decryptionKey = payload.machine_key === undefined
    ? unsealDecryptionKey(payload.encrypted_key, payload.hardware_id, payload.license_id)
    : unsealForMachine({ ...payload, encrypted_key: payload.encrypted_key, machine_key: payload.machine_key }, options.machinePrivateKey);
  return { payload, hardwareChecked: true, decryptionKey };
}

/** valid_from <= now < valid_until, to the second. */
export function checkValidityWindow(payload: Pick<LicenseFilePayload, 'valid_from' | 'valid_until'>, now: Date): void {
  if (now.getTime() < Date.parse(payload.valid_from)) {
    throw new LicenseServerError('LICENSE_NOT_YET_VALID', `license not yet valid: it starts at ${payload.valid_from}`);
  }
  if (now.getTime() >= Date.parse(payload.valid_until)) {
    throw new LicenseServerError('LICENSE_EXPIRED', `license expired at ${payload.valid_until}`);
  }
}

export type SignatureStatus = 'valid' | 'invalid' | 'unchecked' | 'unknown key';

/** The signature's status; used by `license inspect`, which reports rather than refuses. */
export function signatureStatus(file: string | Uint8Array, publicKey: KeySetInput | KeySet | undefined): SignatureStatus {
  if (publicKey === undefined) return 'unchecked';
  const status = checkSignature(decodeLicenseFile(file), asKeySet(publicKey));
  return typeof status === 'string' ? status : 'unknown key';
}

function checkSignature(decoded: DecodedLicenseFile, set: KeySet): 'valid' | 'invalid' | { unknown: string } {
  const { keys, unknown } = keysFor(set, decoded.payload.key_id);
  if (unknown !== undefined) return { unknown: describeUnknownKey(unknown, set) };
  return keys.some((key) => verifyEd25519(decoded.signature, decoded.signedBytes, key.publicKey)) ? 'valid' : 'invalid';
}

/** A parsed set passes through; anything else is parsed (PUBLIC_KEY_INVALID when it is not a key set). */
export function asKeySet(input: KeySetInput | KeySet): KeySet {
  if (Array.isArray(input) && input.length > 0 && input.every((item) => typeof item === 'object' && item !== null && 'keyId' in item)) return input as KeySet;
  return parseKeySet(input as KeySetInput);
}
