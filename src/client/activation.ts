import { hostname } from 'node:os';
import { x25519 } from '@noble/curves/ed25519.js';
import { randomBytes } from 'node:crypto';
import type { KeySet } from '../lib/crypto/key-set.js';
import { isLicenseServerError } from '../lib/errors.js';
import { writeFileDurably } from '../lib/files/durable-write.js';
import { licenseKeyPrefix, normalizeLicenseKey } from '../lib/licensing/license-key.js';
import {
  ACTIVATION_REQUEST_FORMAT,
  ACTIVATION_REQUEST_VERSION,
  decodeBase64UrlStrict,
  encodeActivationRequest,
  encodeBase64Url,
  licenseKeyDigest,
  MACHINE_KEY_BYTES,
  MAX_APP_VERSION_LENGTH,
  MAX_MACHINE_NAME_LENGTH,
  NONCE_BYTES,
  type ActivationRequest,
} from '../lib/offline/activation-request.js';
import { verifyLicenseFile } from '../lib/offline/verify.js';
import { LicenseClientError } from './errors.js';
import { LicenseClientConfigError, type Clock } from './options.js';
import { CacheWriteError, type ClientStore, type PendingRequestRecord } from './store.js';

/** How many replaced requests pending-request.json remembers, to name "an older request". */
const SUPERSEDED_KEPT = 10;

export interface ActivationRequestOptions {
  /** Shown to the operator and recorded as the machine's name (default: the host name). */
  readonly machineName?: string;
  /** Recorded as the machine's client version (default: the client's `version` option). */
  readonly appVersion?: string;
  /**
   * `cache` (default): the request's private key and nonce stay in the cache directory
   * (`pending-request.json`, mode 0600) until installLicenseFile installs its file.
   * `return`: nothing is written; they come back as `pending`, for the application to keep
   * (as secretly as the cache would) and to hand to installLicenseFile.
   */
  readonly keep?: 'cache' | 'return';
}

/** What the machine keeps of a request until its file is installed. `privateKey` is secret. */
export interface PendingActivationRequest {
  readonly nonce: string;
  /** Unpadded base64url of the X25519 public key, as in the request. */
  readonly machineKey: string;
  /** Unpadded base64url of the 32-byte X25519 private key. Never send it anywhere. */
  readonly privateKey: string;
  readonly hardwareId: string;
  readonly createdAt: string;
}

export interface ActivationRequestResult {
  /** The request file's text: carry it to the operator (it holds no secret). */
  readonly text: string;
  readonly request: ActivationRequest;
  /** Only with `keep: 'return'`. */
  readonly pending?: PendingActivationRequest;
}

export interface InstallOptions {
  /** The pending request the application kept (`keep: 'return'`); default: the cache's. */
  readonly pending?: PendingActivationRequest;
}

export interface InstallResult {
  /** Where the file was put (offline.licenseFile). */
  readonly file: string;
  readonly licenseId: string;
  readonly validUntil: string;
  readonly hardwareId: string;
  readonly requestNonce: string;
}

/** What the two operations need of the client. */
export interface ActivationContext {
  readonly store: ClientStore;
  readonly licenseKey: string;
  readonly version: string;
  readonly hardwareId: string;
  readonly cacheDir: string;
  readonly licenseFile: string | undefined;
  readonly clock: Clock;
  readonly keySet: () => Promise<KeySet | undefined>;
  /** The `hw1-` ID this machine used before its `hw2-` one, if it remembers one: the request's previous_hardware_id. */
  readonly previousHardwareId: () => Promise<string | undefined>;
}

export async function createActivationRequest(context: ActivationContext, options: ActivationRequestOptions = {}): Promise<ActivationRequestResult> {
  const keep = options.keep ?? 'cache';
  if (keep !== 'cache' && keep !== 'return') throw new LicenseClientConfigError('keep must be "cache" or "return"');
  if (keep === 'cache' && context.cacheDir === '') throw new LicenseClientConfigError('createActivationRequest needs a cache directory: set offline.cacheDir, or pass keep: "return"');
  const privateKey = x25519.utils.randomSecretKey();
  const machineKey = x25519.getPublicKey(privateKey);
  const created = new Date(Math.floor(context.clock.now().getTime() / 1000) * 1000);
  // The server moves the machine's record (and seat) from its hw1 ID, as a validation does.
  const previousHardwareId = await context.previousHardwareId();
  const request: ActivationRequest = {
    format: ACTIVATION_REQUEST_FORMAT,
    version: ACTIVATION_REQUEST_VERSION,
    license_key_prefix: keyPrefixOf(context.licenseKey),
    license_key_digest: licenseKeyDigest(context.licenseKey),
    hardware_id: context.hardwareId,
    ...(previousHardwareId !== undefined && previousHardwareId !== context.hardwareId ? { previous_hardware_id: previousHardwareId } : {}),
    machine_name: options.machineName ?? defaultMachineName(),
    app_version: options.appVersion ?? context.version.slice(0, MAX_APP_VERSION_LENGTH),
    machine_key: encodeBase64Url(machineKey),
    nonce: encodeBase64Url(randomBytes(NONCE_BYTES)),
    created_at: `${created.toISOString().slice(0, 19)}Z`,
  };
  let text: string;
  try {
    text = encodeActivationRequest(request);
  } catch (error) {
    // A machine name or version the format does not take: the message names the member.
    if (isLicenseServerError(error)) throw new LicenseClientError(error.code, error.message);
    throw error;
  }
  const pending: PendingActivationRequest = {
    nonce: request.nonce,
    machineKey: request.machine_key,
    privateKey: encodeBase64Url(privateKey),
    hardwareId: request.hardware_id,
    createdAt: request.created_at,
  };
  privateKey.fill(0);
  if (keep === 'return') return { text, request, pending };
  const previous = await context.store.readPendingRequest();
  const superseded = previous ? [{ nonce: previous.nonce, created_at: previous.created_at }, ...previous.superseded].slice(0, SUPERSEDED_KEPT) : [];
  await cacheWrite(() => context.store.writePendingRequest({ ...recordOf(pending), superseded }), 'the request was not kept');
  return { text, request };
}

/**
 * Puts a file answering this machine's pending request in place, after checking it as
 * validation will (signature, window, license key) and that it answers that request: bound
 * to this machine's hardware ID and carrying the request's nonce (LICENSE_FILE_WRONG_REQUEST
 * otherwise, naming what differs). The file is written .partial, fsynced and renamed over
 * offline.licenseFile; then the pending request is forgotten, its key pair kept as
 * machine-key.json. The same file (or another of the same request) installs again.
 */
export async function installLicenseFile(context: ActivationContext, file: string | Uint8Array, options: InstallOptions = {}): Promise<InstallResult> {
  const target = context.licenseFile;
  const keySet = await context.keySet();
  if (target === undefined || keySet === undefined) {
    throw new LicenseClientConfigError('installLicenseFile needs offline.licenseFile (where the file goes) and offline.publicKey (to check it)');
  }
  const now = context.clock.now();
  const payload = guarded(() => verifyLicenseFile(file, { publicKey: keySet, skipHardwareCheck: true, now }).payload);
  if (payload.license_key_prefix !== keyPrefixOf(context.licenseKey)) {
    throw new LicenseClientError('LICENSE_FILE_MISMATCH', `the license file is for another license key (${payload.license_key_prefix}...)`);
  }
  if (payload.hardware_id === '') {
    throw new LicenseClientError('LICENSE_FILE_WRONG_REQUEST', 'the license file is not bound to a machine, so it answers no activation request of this machine');
  }
  if (payload.hardware_id.normalize('NFC') !== context.hardwareId.normalize('NFC')) {
    throw new LicenseClientError(
      'LICENSE_FILE_WRONG_REQUEST',
      `the license file is for another machine: it is bound to hardware ID ${JSON.stringify(payload.hardware_id)}, this machine's is ${JSON.stringify(context.hardwareId)}`,
    );
  }
  const pending = options.pending ? checkedPending(options.pending) : await context.store.readPendingRequest();
  const installed = options.pending ? undefined : await context.store.readMachineKey();
  const nonce = payload.request_nonce;
  const answersPending = pending !== undefined && nonce === pending.nonce;
  // The file of a request installed before (a second copy, a re-issue after a failed write).
  const answersInstalled = !answersPending && installed !== undefined && nonce === installed.request_nonce;
  if (!answersPending && !answersInstalled) throw new LicenseClientError('LICENSE_FILE_WRONG_REQUEST', wrongRequest(nonce, pending));
  // Everything validation checks, the binding and the sealed key included: a machine-key
  // file's key opens with the private key of the request it answers.
  const privateKeyText = answersPending ? pending!.private_key : installed!.private_key;
  const machinePrivateKey = decodeBase64UrlStrict(privateKeyText, 32);
  try {
    const verified = guarded(() => verifyLicenseFile(file, { publicKey: keySet, hardwareId: context.hardwareId, now, ...(machinePrivateKey ? { machinePrivateKey } : {}) }));
    verified.decryptionKey?.fill(0);
  } finally {
    machinePrivateKey?.fill(0);
  }
  try {
    await writeFileDurably(target, typeof file === 'string' ? file : Buffer.from(file), { overwrite: true });
  } catch (error) {
    throw new LicenseClientError('LICENSE_FILE_NOT_WRITTEN', error instanceof Error ? error.message : String(error));
  }
  // The application that kept the pending request keeps its key pair too: nothing goes to the cache.
  if (answersPending && pending && !options.pending) {
    await cacheWrite(() => context.store.writeMachineKey({
      request_nonce: pending.nonce,
      machine_key: pending.machine_key,
      private_key: pending.private_key,
      hardware_id: pending.hardware_id,
      installed_at: now.toISOString(),
    }), 'the file is installed, but the machine key of its request was not kept');
    await cacheWrite(() => context.store.deletePendingRequest(), 'the file is installed, but the pending request was not forgotten');
  }
  return { file: target, licenseId: payload.license_id, validUntil: payload.valid_until, hardwareId: payload.hardware_id, requestNonce: nonce! };
}

function wrongRequest(nonce: string | undefined, pending: PendingRequestRecord | undefined): string {
  const waiting = pending ? `this machine's pending request is ${pending.nonce}, made at ${pending.created_at}` : 'no activation request is pending on this machine';
  if (nonce === undefined) return `the license file was not made from an activation request (it has no request_nonce); ${waiting}`;
  const older = pending?.superseded.find((entry) => entry.nonce === nonce);
  if (older) return `the license file answers an older request of this machine (${nonce}, made at ${older.created_at}), replaced since: ${waiting}; check that one out`;
  return `the license file answers another activation request (${nonce}), not this machine's: ${waiting}`;
}

function recordOf(pending: PendingActivationRequest): Omit<PendingRequestRecord, 'superseded'> {
  return {
    nonce: pending.nonce,
    machine_key: pending.machineKey,
    private_key: pending.privateKey,
    hardware_id: pending.hardwareId,
    created_at: pending.createdAt,
  };
}

/** A pending request handed back by the application: its form, before it decides anything. */
function checkedPending(pending: PendingActivationRequest): PendingRequestRecord {
  const ok = typeof pending === 'object' && pending !== null
    && typeof pending.nonce === 'string' && decodeBase64UrlStrict(pending.nonce, NONCE_BYTES) !== undefined
    && typeof pending.machineKey === 'string' && decodeBase64UrlStrict(pending.machineKey, MACHINE_KEY_BYTES) !== undefined
    && typeof pending.privateKey === 'string' && decodeBase64UrlStrict(pending.privateKey, 32) !== undefined
    && typeof pending.hardwareId === 'string' && typeof pending.createdAt === 'string';
  if (!ok) throw new LicenseClientConfigError('pending must be the `pending` of createActivationRequest({ keep: "return" }), unchanged');
  return { ...recordOf(pending), superseded: [] };
}

/** The file's reader's refusal, as the client reports it. */
function guarded<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (isLicenseServerError(error)) throw new LicenseClientError(error.code, error.message);
    throw error;
  }
}

async function cacheWrite(write: () => Promise<void>, what: string): Promise<void> {
  try {
    await write();
  } catch (error) {
    if (error instanceof CacheWriteError) throw new LicenseClientError('CACHE_NOT_WRITTEN', `${what}: ${error.message}`);
    throw error;
  }
}

/** The host name, made to fit the request (no control characters, at most 255 code units). */
function defaultMachineName(): string {
  let name: string;
  try {
    name = hostname();
  } catch {
    return '';
  }
  // eslint-disable-next-line no-control-regex
  return name.replace(/[\u0000-\u001f\u007f-\u009f]/g, '').slice(0, MAX_MACHINE_NAME_LENGTH);
}

/** The license key's prefix as the client compares it with a file's (license-client.ts keyPrefix). */
function keyPrefixOf(licenseKey: string): string {
  return licenseKeyPrefix(normalizeLicenseKey(licenseKey) ?? licenseKey.trim().toUpperCase());
}
