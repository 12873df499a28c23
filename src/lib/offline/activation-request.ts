import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { LicenseServerError } from '../errors.js';
import { normalizeLicenseKey } from '../licensing/license-key.js';
import { isSmallOrderPoint } from '../crypto/x25519-small-order.js';
import { hasLoneSurrogate } from '../validate.js';
import { parseHardwareId } from './binding.js';

/**
 * The activation request file (docs/offline-license-format.md, "Activation request files"):
 * what an air-gapped machine writes for the operator who checks its license out.
 *
 *   -----BEGIN LICENSE ACTIVATION REQUEST-----
 *   Base64(UTF-8(JCS(request))), wrapped at 64 columns
 *   -----END LICENSE ACTIVATION REQUEST-----
 *
 * Shared by the server (checkout --request) and the client library (createActivationRequest),
 * so it imports nothing of the server. A request is not signed: it carries no secret (the
 * license key only as a salted digest, the machine's public key, never its private key).
 */
export const ACTIVATION_REQUEST_FORMAT = 'license-server-activation-request';
export const ACTIVATION_REQUEST_VERSION = 1;
export const ACTIVATION_REQUEST_BEGIN = '-----BEGIN LICENSE ACTIVATION REQUEST-----';
export const ACTIVATION_REQUEST_END = '-----END LICENSE ACTIVATION REQUEST-----';
/** The digest's domain separation: a request never holds a value that is the license key's plain SHA-256. */
export const LICENSE_KEY_DIGEST_CONTEXT = 'license-server/v1/activation-request\n';
export const NONCE_BYTES = 16;
export const MACHINE_KEY_BYTES = 32;
/** Limits of the two descriptive members, in UTF-16 code units. */
export const MAX_MACHINE_NAME_LENGTH = 255;
export const MAX_APP_VERSION_LENGTH = 100;
const LINE_WIDTH = 64;

export interface ActivationRequest {
  readonly format: typeof ACTIVATION_REQUEST_FORMAT;
  readonly version: typeof ACTIVATION_REQUEST_VERSION;
  readonly license_key_prefix: string;
  readonly license_key_digest: string;
  readonly hardware_id: string;
  readonly previous_hardware_id?: string;
  readonly machine_name: string;
  readonly app_version: string;
  readonly machine_key: string;
  readonly nonce: string;
  readonly created_at: string;
}

const MEMBERS = [
  'format', 'version', 'license_key_prefix', 'license_key_digest', 'hardware_id', 'previous_hardware_id',
  'machine_name', 'app_version', 'machine_key', 'nonce', 'created_at',
];
const OPTIONAL = new Set(['previous_hardware_id']);
const RFC3339_UTC_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const ASCII_WHITESPACE = /[\t\n\f\r ]/g;

/**
 * The license key as the server stores it (upper case, Crockford's look-alikes read as
 * digits, groups of four), so that a key typed in lower case or with O for 0 gives the
 * server's digest; a text that cannot be one of our keys is taken as given, trimmed.
 */
export function canonicalLicenseKey(licenseKey: string): string {
  return normalizeLicenseKey(licenseKey) ?? licenseKey.trim();
}

/** `license_key_digest`: unpadded base64url of SHA-256(UTF-8(context + canonical license key)). */
export function licenseKeyDigest(licenseKey: string): string {
  return createHash('sha256').update(LICENSE_KEY_DIGEST_CONTEXT + canonicalLicenseKey(licenseKey), 'utf8').digest('base64url');
}

export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}

/** Unpadded base64url (RFC 4648 section 5) of exactly `length` bytes, in its canonical form; else undefined. */
export function decodeBase64UrlStrict(text: string, length: number): Uint8Array | undefined {
  if (!BASE64URL.test(text) || text.length !== Math.ceil((length * 4) / 3)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.length !== length || bytes.toString('base64url') !== text) return undefined;
  return new Uint8Array(bytes);
}

/** The request's text: the armour lines around its Base64, 64 columns a line, LF line ends. */
export function encodeActivationRequest(request: ActivationRequest): string {
  // Checked as a reader checks it: a writer never emits what its own reader refuses.
  const canonical = canonicalRequestText(checkRequest(request as unknown as Record<string, unknown>));
  const base64 = Buffer.from(canonical, 'utf8').toString('base64');
  const lines = base64.match(new RegExp(`.{1,${LINE_WIDTH}}`, 'g')) ?? [];
  return `${ACTIVATION_REQUEST_BEGIN}\n${lines.join('\n')}\n${ACTIVATION_REQUEST_END}\n`;
}

/**
 * What identifies a request's contents: unpadded base64url of SHA-256 of its RFC 8785 form
 * (43 characters), every member included. The server records it with the nonce, so that a
 * request answered again must be the same request, member for member (request-checkout.ts).
 */
export function activationRequestDigest(request: ActivationRequest): string {
  return createHash('sha256').update(canonicalRequestText(request), 'utf8').digest('base64url');
}

function canonicalRequestText(request: ActivationRequest): string {
  const text = canonicalize(request);
  if (text === undefined) throw new TypeError('activation request cannot be canonicalised');
  return text;
}

function malformed(reason: string): never {
  throw new LicenseServerError('ACTIVATION_REQUEST_MALFORMED', `activation request is malformed: ${reason}`);
}

/**
 * Reads a request strictly. Around and inside the armour only ASCII whitespace is free (a
 * mail program may re-wrap the lines or add CRLF); everything else must be exactly what a
 * writer makes: canonical standard Base64, UTF-8 of the request's RFC 8785 form (so a member
 * twice, another order or spacing are refused), exactly the members of the format, each of
 * its form. Throws ACTIVATION_REQUEST_MALFORMED naming the first problem.
 */
export function decodeActivationRequest(input: string | Uint8Array): ActivationRequest {
  // Bytes are read one character each: any byte above 0x7E is then refused below.
  const text = typeof input === 'string' ? input : Buffer.from(input).toString('latin1');
  if (text.replace(ASCII_WHITESPACE, '') === '') malformed('it is empty');
  // eslint-disable-next-line no-control-regex
  if (/[^\t\n\f\r\x20-\x7e]/.test(text)) malformed('it holds characters that are not printable ASCII');
  const trimmed = text.replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '');
  if (!trimmed.startsWith(ACTIVATION_REQUEST_BEGIN)) malformed(`it does not start with the line ${ACTIVATION_REQUEST_BEGIN}`);
  if (!trimmed.endsWith(ACTIVATION_REQUEST_END)) malformed(`it does not end with the line ${ACTIVATION_REQUEST_END} (it may be truncated)`);
  const body = trimmed.slice(ACTIVATION_REQUEST_BEGIN.length, trimmed.length - ACTIVATION_REQUEST_END.length).replace(ASCII_WHITESPACE, '');
  if (body.length === 0) malformed('it holds nothing between its BEGIN and END lines');
  if (!STANDARD_BASE64.test(body)) malformed('the text between its BEGIN and END lines is not standard Base64');
  const bytes = Buffer.from(body, 'base64');
  if (bytes.toString('base64') !== body) malformed('the Base64 is not the canonical encoding of its bytes');
  let json: string;
  try {
    json = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return malformed('the decoded content is not UTF-8');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return malformed('the decoded content is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) malformed('the content is not a JSON object');
  const request = checkRequest(parsed as Record<string, unknown>);
  let canonical: string | undefined;
  try {
    canonical = canonicalize(parsed);
  } catch {
    canonical = undefined;
  }
  if (canonical !== json) malformed('its JSON is not in RFC 8785 canonical form (members sorted, no spaces, each member once)');
  return request;
}

/** Exactly the members of the format, each of its form; the request as a typed value. */
function checkRequest(object: Record<string, unknown>): ActivationRequest {
  for (const name of Object.keys(object)) if (!MEMBERS.includes(name)) malformed(`the member "${name}" is not part of an activation request`);
  for (const name of MEMBERS) if (!OPTIONAL.has(name) && !Object.hasOwn(object, name)) malformed(`the member "${name}" is missing`);
  if (object.format !== ACTIVATION_REQUEST_FORMAT) malformed(`"format" must be "${ACTIVATION_REQUEST_FORMAT}"`);
  if (object.version !== ACTIVATION_REQUEST_VERSION) {
    malformed(typeof object.version === 'number' && Number.isInteger(object.version)
      ? `it has version ${object.version}; this license-server reads version ${ACTIVATION_REQUEST_VERSION}`
      : '"version" must be the integer 1');
  }
  const text = (name: string, max: number): string => {
    const value = object[name];
    if (typeof value !== 'string' || value.length > max || CONTROL.test(value) || hasLoneSurrogate(value)) {
      malformed(`"${name}" must be a string of at most ${max} UTF-16 code units without control characters`);
    }
    return value;
  };
  const prefix = object.license_key_prefix;
  if (typeof prefix !== 'string' || prefix.length !== 8) malformed('"license_key_prefix" must be 8 UTF-16 code units');
  const bytesOf = (name: string, length: number): string => {
    const value = object[name];
    if (typeof value !== 'string' || !decodeBase64UrlStrict(value, length)) {
      malformed(`"${name}" must be the unpadded base64url of ${length} bytes (${Math.ceil((length * 4) / 3)} characters)`);
    }
    return value;
  };
  // A point of small order is no machine's key, and sealing to it fails (hpke.ts dh).
  const machineKey = (): string => {
    const value = bytesOf('machine_key', MACHINE_KEY_BYTES);
    if (isSmallOrderPoint(decodeBase64UrlStrict(value, MACHINE_KEY_BYTES)!)) {
      malformed('"machine_key" is an X25519 point of small order (section 12 lists them), not the public key of a key pair');
    }
    return value;
  };
  const hardwareId = (name: string): string => {
    const value = object[name];
    let parsed: string;
    try {
      parsed = parseHardwareId(value);
    } catch (error) {
      return malformed(`"${name}": ${error instanceof Error ? error.message.replace(/^hardware_id /, '') : String(error)}`);
    }
    if (parsed !== value) malformed(`"${name}" must be in Unicode NFC`);
    return parsed;
  };
  const createdAt = object.created_at;
  if (typeof createdAt !== 'string' || !RFC3339_UTC_SECONDS.test(createdAt) || Number.isNaN(Date.parse(createdAt))
    || new Date(createdAt).toISOString().slice(0, 19) !== createdAt.slice(0, 19)) {
    malformed('"created_at" must be an RFC 3339 UTC timestamp with second precision, such as 2026-11-22T10:00:00Z');
  }
  const request: ActivationRequest = {
    format: ACTIVATION_REQUEST_FORMAT,
    version: ACTIVATION_REQUEST_VERSION,
    license_key_prefix: prefix,
    license_key_digest: bytesOf('license_key_digest', 32),
    hardware_id: hardwareId('hardware_id'),
    ...(Object.hasOwn(object, 'previous_hardware_id') ? { previous_hardware_id: hardwareId('previous_hardware_id') } : {}),
    machine_name: text('machine_name', MAX_MACHINE_NAME_LENGTH),
    app_version: text('app_version', MAX_APP_VERSION_LENGTH),
    machine_key: machineKey(),
    nonce: bytesOf('nonce', NONCE_BYTES),
    created_at: createdAt,
  };
  if (request.previous_hardware_id === request.hardware_id) malformed('"previous_hardware_id" must not equal "hardware_id"');
  return request;
}
