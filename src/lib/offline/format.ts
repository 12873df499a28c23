import canonicalize from 'canonicalize';
import { KEY_ID_PATTERN } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import { decodeBase64Strict, encodeBase64 } from './base64.js';
import { MAX_HARDWARE_ID_LENGTH, SEALED_KEY_LENGTH } from './binding.js';
import { MACHINE_SEALED_KEY_LENGTH, machineKeyMembersProblem } from './machine-key.js';
import { repeatedMember } from './unique-members.js';

/**
 * The `.lic` file, format versions 1 and 2, as pinned in docs/offline-license-format.md:
 *
 *   file      = Base64(UTF-8(JCS(payload + {"signature": Base64(sig)}))) LF
 *   sig       = Ed25519(signing key, UTF-8(JCS(payload)))
 *
 * JCS is RFC 8785. Free of server imports: the client library decodes with this module.
 * Version 2 is version 1 with the members of V2_MEMBERS, at least one of them present; a
 * file that needs none of them is written as version 1, byte for byte as before.
 */
export const LICENSE_FILE_VERSION = 1;
export const LICENSE_FILE_VERSION_2 = 2;
/** The members version 2 adds (section "Version 2"); a version 2 file carries at least one. */
export const V2_MEMBERS = ['request_nonce', 'machine_key'] as const;
/** `request_nonce`: the activation request's nonce as written there, 16 bytes in unpadded base64url. */
const REQUEST_NONCE = /^[A-Za-z0-9_-]{21}[AQgw]$/;

export interface LicenseFileEntitlement {
  readonly code: string;
  readonly name: string;
  readonly usage_limit: number | null;
}

export interface LicenseFilePayload {
  readonly version: 1 | 2;
  readonly license_id: string;
  readonly license_key_prefix: string;
  readonly customer_name: string;
  readonly license_type: 'time_based' | 'usage_based' | 'hybrid';
  readonly valid_from: string;
  readonly valid_until: string;
  readonly hardware_id: string;
  readonly entitlements: readonly LicenseFileEntitlement[];
  readonly encrypted_key?: string;
  readonly issued_at: string;
  readonly issuer: string;
  /** The signing key's id (crypto/key-set.ts); absent in files signed by a store's first key. */
  readonly key_id?: string;
  /** Version 2: the nonce of the activation request the file answers. */
  readonly request_nonce?: string;
  /** Version 2: the machine's X25519 public key, unpadded base64url; encrypted_key is then sealed to it. */
  readonly machine_key?: string;
}

export interface DecodedLicenseFile {
  readonly payload: LicenseFilePayload;
  readonly signature: Uint8Array;
  /** UTF-8 of JCS(the document without "signature"): the bytes the signature covers. */
  readonly signedBytes: Uint8Array;
}

const utf8 = new TextEncoder();

/** The RFC 8785 form of the payload; its UTF-8 bytes are what the signature covers. */
export function canonicalPayloadText(payload: LicenseFilePayload): string {
  const text = canonicalPayloadOfKnownShape(payload) ?? canonicalize(payload);
  if (text === undefined) throw new TypeError('payload cannot be canonicalised');
  return text;
}

/** The payload's members in RFC 8785 order (UTF-16 code units; all ASCII here). */
const MEMBER_ORDER = [
  'customer_name', 'encrypted_key', 'entitlements', 'hardware_id', 'issued_at', 'issuer', 'key_id', 'license_id',
  'license_key_prefix', 'license_type', 'machine_key', 'request_nonce', 'valid_from', 'valid_until', 'version',
] as const;

/**
 * JCS of a payload made of exactly the members above, written out directly: a general
 * canonicaliser sorts keys and walks values, about a tenth of a checkout. Strings and
 * numbers are serialised by JSON.stringify, which is what RFC 8785 prescribes (and what
 * `canonicalize` calls). Anything else (an unknown member, an unexpected type, a string
 * that may hold a lone surrogate, which JCS refuses) gives undefined, for the general path.
 */
function canonicalPayloadOfKnownShape(payload: LicenseFilePayload): string | undefined {
  const record = payload as unknown as Record<string, unknown>;
  let text = '{';
  let members = 0;
  for (const name of MEMBER_ORDER) {
    if (!Object.hasOwn(record, name)) continue;
    members += 1;
    const value = record[name];
    if (value === undefined) continue;
    const serialised = name === 'entitlements' ? canonicalEntitlements(value) : canonicalScalar(value);
    if (serialised === undefined) return undefined;
    text += `${text.length === 1 ? '' : ','}"${name}":${serialised}`;
  }
  if (members !== Object.keys(record).length) return undefined;
  text += '}';
  // JSON.stringify writes a lone surrogate as \udXXX, which JCS forbids; the general path throws.
  return text.includes('\\ud') || text.includes('\\uD') ? undefined : text;
}

function canonicalEntitlements(value: unknown): string | undefined {
  if (!Array.isArray(value)) return undefined;
  let text = '[';
  for (const entry of value as unknown[]) {
    if (typeof entry !== 'object' || entry === null || Object.getPrototypeOf(entry) !== Object.prototype) return undefined;
    const { code, name, usage_limit: limit } = entry as Record<string, unknown>;
    if (Object.keys(entry).length !== 3 || typeof code !== 'string' || typeof name !== 'string' || !Object.hasOwn(entry, 'usage_limit')) return undefined;
    const serialisedLimit = limit === null ? 'null' : canonicalScalar(limit);
    if (serialisedLimit === undefined) return undefined;
    text += `${text.length === 1 ? '' : ','}{"code":${JSON.stringify(code)},"name":${JSON.stringify(name)},"usage_limit":${serialisedLimit}}`;
  }
  return `${text}]`;
}

function canonicalScalar(value: unknown): string | undefined {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' && Number.isFinite(value)) return JSON.stringify(value);
  return undefined;
}

export function canonicalPayloadBytes(payload: LicenseFilePayload): Uint8Array {
  return utf8.encode(canonicalPayloadText(payload));
}

/** The file's text: one line of Base64 and a line feed. */
export function encodeLicenseFile(payload: LicenseFilePayload, signature: Uint8Array): string {
  return encodeSignedPayload(canonicalPayloadText(payload), signature);
}

/**
 * The file's text from the canonical payload already made for signing, without
 * canonicalising a second time (a tenth of a checkout's cost). The canonical form of the
 * whole document is the payload's with the "signature" member at its sorted place, just
 * before "valid_from", which every payload has. Inside JSON text an unescaped `,"` can
 * only begin a member, so that place is found without parsing.
 */
export function encodeSignedPayload(canonicalPayload: string, signature: Uint8Array): string {
  if (signature.length !== 64) throw new TypeError('signature: expected 64 bytes');
  const at = canonicalPayload.indexOf(',"valid_from":');
  if (at === -1) throw new TypeError('payload has no valid_from');
  const document = `${canonicalPayload.slice(0, at)},"signature":"${encodeBase64(signature)}"${canonicalPayload.slice(at)}`;
  return `${Buffer.from(document, 'utf8').toString('base64')}\n`;
}

/** ASCII whitespace as WHATWG defines it: tab, line feed, form feed, carriage return, space. */
const ASCII_WHITESPACE = /[\t\n\f\r ]/g;
const RFC3339_UTC_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const LOWERCASE_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TYPES = ['time_based', 'usage_based', 'hybrid'];
const FIELDS = [
  'version', 'license_id', 'license_key_prefix', 'customer_name', 'license_type', 'valid_from', 'valid_until',
  'hardware_id', 'entitlements', 'encrypted_key', 'issued_at', 'issuer', 'key_id', 'signature',
];
const OPTIONAL = new Set(['encrypted_key', 'key_id']);
const FIELDS_V2 = [...FIELDS, ...V2_MEMBERS];

function malformed(reason: string): never {
  throw new LicenseServerError('LICENSE_FILE_MALFORMED', `license file is malformed: ${reason}`);
}

/**
 * Decodes a file strictly, without checking the signature (./verify.ts does). The signed
 * bytes are made as spec section 5.4 says: the parsed document without "signature",
 * canonicalised, so a file another conforming writer laid out differently (whitespace,
 * member order) verifies. What could make two verifiers read one file differently is
 * refused: non-canonical Base64, invalid UTF-8, a repeated member, an unknown member.
 */
export function decodeLicenseFile(file: string | Uint8Array): DecodedLicenseFile {
  let text: string;
  if (typeof file === 'string') {
    text = file;
  } else {
    for (const byte of file) if (byte > 0x7e) malformed('it holds bytes that are not ASCII');
    text = Buffer.from(file).toString('latin1');
  }
  const base64 = text.replace(ASCII_WHITESPACE, '');
  if (base64.length === 0) malformed('it is empty');
  const bytes = decodeBase64Strict(base64);
  if (!bytes) malformed('it is not valid Base64 (it may be truncated)');

  let json: string;
  try {
    json = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return malformed('the decoded content is not UTF-8');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return malformed('the decoded content is not JSON (it may be truncated)');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) malformed('the content is not a JSON object');
  const repeated = repeatedMember(json);
  if (repeated !== undefined) malformed(`the member ${JSON.stringify(repeated)} appears twice in one object`);
  const object = parsed as Record<string, unknown>;

  if (object.version !== LICENSE_FILE_VERSION && object.version !== LICENSE_FILE_VERSION_2) {
    if (typeof object.version === 'number' && Number.isInteger(object.version)) {
      throw new LicenseServerError(
        'LICENSE_FILE_UNSUPPORTED_VERSION',
        `license file has format version ${object.version}; this license-server reads versions ${LICENSE_FILE_VERSION} and ${LICENSE_FILE_VERSION_2}`,
      );
    }
    malformed('the field "version" is missing or not an integer');
  }
  const version = object.version as 1 | 2;
  for (const field of FIELDS) {
    if (!OPTIONAL.has(field) && !(field in object)) malformed(`the field "${field}" is missing`);
  }
  const known: readonly string[] = version === 1 ? FIELDS : FIELDS_V2;
  for (const field of Object.keys(object)) {
    if (!known.includes(field)) malformed(`the field "${field}" is not part of format version ${version}`);
  }
  if (version === 2 && !V2_MEMBERS.some((member) => member in object)) {
    malformed(`a version 2 file must carry ${V2_MEMBERS.map((member) => `"${member}"`).join(' or ')}; without, it is written as version 1`);
  }

  const payload = checkPayload(object);
  const signature = typeof object.signature === 'string' ? decodeBase64Strict(object.signature) : undefined;
  if (!signature || signature.length !== 64) malformed('"signature" must be the Base64 of 64 bytes');
  const { signature: _signature, ...unsigned } = object;
  let canonical: string | undefined;
  try {
    canonical = canonicalize(unsigned);
  } catch {
    // JSON.parse takes "\ud800"; RFC 8785 (and UTF-8) has no form for a lone surrogate.
    canonical = undefined;
  }
  if (canonical === undefined) malformed('a string holds a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair)');
  return { payload, signature, signedBytes: utf8.encode(canonical) };
}

function checkPayload(object: Record<string, unknown>): LicenseFilePayload {
  const text = (field: string, max = 1000): string => {
    const value = object[field];
    if (typeof value !== 'string' || value.length > max) malformed(`"${field}" must be a string of at most ${max} UTF-16 code units`);
    return value;
  };
  const timestamp = (field: string): string => {
    const value = text(field);
    if (!RFC3339_UTC_SECONDS.test(value) || Number.isNaN(Date.parse(value)) || new Date(value).toISOString().slice(0, 19) !== value.slice(0, 19)) {
      malformed(`"${field}" must be an RFC 3339 UTC timestamp with second precision, such as 2026-11-22T10:00:00Z`);
    }
    return value;
  };
  const licenseId = text('license_id');
  if (!LOWERCASE_UUID.test(licenseId)) malformed('"license_id" must be a lowercase UUID');
  const prefix = text('license_key_prefix');
  if (prefix.length !== 8) malformed('"license_key_prefix" must be 8 UTF-16 code units');
  const type = text('license_type');
  if (!TYPES.includes(type)) malformed('"license_type" must be time_based, usage_based or hybrid');
  const hardwareId = text('hardware_id', MAX_HARDWARE_ID_LENGTH);
  const entitlements = object.entitlements;
  if (!Array.isArray(entitlements)) malformed('"entitlements" must be an array');
  let previous: string | undefined;
  for (const entry of entitlements) {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) malformed('each entitlement must be an object');
    const keys = Object.keys(entry).sort().join(',');
    if (keys !== 'code,name,usage_limit') malformed('each entitlement must have exactly "code", "name" and "usage_limit"');
    const { code, name, usage_limit: limit } = entry as Record<string, unknown>;
    if (typeof code !== 'string' || typeof name !== 'string') malformed('entitlement "code" and "name" must be strings');
    if (limit !== null && !(typeof limit === 'number' && Number.isSafeInteger(limit) && limit >= 0)) {
      malformed('entitlement "usage_limit" must be a non-negative integer or null');
    }
    if (previous !== undefined && !(previous < code)) malformed('"entitlements" must be sorted by code, without repeats');
    previous = code;
  }
  if ('key_id' in object && !(typeof object.key_id === 'string' && KEY_ID_PATTERN.test(object.key_id))) {
    malformed('"key_id" must be 16 lowercase hex digits');
  }
  const problem = machineKeyMembersProblem(object, hardwareId);
  if (problem !== undefined) malformed(problem);
  if ('encrypted_key' in object) {
    // The HPKE form of a machine-key file is longer than the hardware-ID form.
    const length = 'machine_key' in object ? MACHINE_SEALED_KEY_LENGTH : SEALED_KEY_LENGTH;
    const sealed = typeof object.encrypted_key === 'string' ? decodeBase64Strict(object.encrypted_key) : undefined;
    if (!sealed || sealed.length !== length) malformed(`"encrypted_key" must be the Base64 of ${length} bytes`);
    if (hardwareId === '') malformed('"encrypted_key" requires a "hardware_id"');
  }
  if ('request_nonce' in object && !(typeof object.request_nonce === 'string' && REQUEST_NONCE.test(object.request_nonce))) {
    malformed('"request_nonce" must be the unpadded base64url of 16 bytes (22 characters)');
  }
  const payload: LicenseFilePayload = {
    version: object.version as 1 | 2,
    license_id: licenseId,
    license_key_prefix: prefix,
    customer_name: text('customer_name'),
    license_type: type as LicenseFilePayload['license_type'],
    valid_from: timestamp('valid_from'),
    valid_until: timestamp('valid_until'),
    hardware_id: hardwareId,
    entitlements: entitlements as LicenseFileEntitlement[],
    ...('encrypted_key' in object ? { encrypted_key: object.encrypted_key as string } : {}),
    issued_at: timestamp('issued_at'),
    issuer: text('issuer'),
    ...('key_id' in object ? { key_id: object.key_id as string } : {}),
    ...('request_nonce' in object ? { request_nonce: object.request_nonce as string } : {}),
    ...('machine_key' in object ? { machine_key: object.machine_key as string } : {}),
  };
  if (payload.valid_until <= payload.valid_from) malformed('"valid_until" must be after "valid_from"');
  return payload;
}
