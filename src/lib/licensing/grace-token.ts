import { describeUnknownKey, keysFor, type KeySet, type KeySetInput } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import { verifyEd25519 } from '../offline/ed25519.js';
import { repeatedMember } from '../offline/unique-members.js';
import { asKeySet } from '../offline/verify.js';
import type { LicenseFileEntitlement } from '../offline/format.js';

/**
 * The grace token (docs/grace-token.md): a JWT (RFC 7519) in compact JWS form (RFC 7515)
 * signed with the server's Ed25519 key, `alg: EdDSA` (RFC 8037). Online validation hands
 * one out; a client that loses the server honours it until `exp`. Any JWT library given
 * the server's PEM verifies it. Free of server imports: the client library verifies here.
 */
export interface GraceTokenClaims {
  readonly iss: string;
  /** The license id. */
  readonly sub: string;
  readonly iat: number;
  readonly nbf: number;
  readonly exp: number;
  readonly jti: string;
  readonly license_id: string;
  readonly license_key_prefix: string;
  readonly license_type: string;
  readonly hardware_id: string;
  /** The license's own end (RFC 3339); exp never passes it. */
  readonly license_valid_until: string;
  readonly entitlements: readonly LicenseFileEntitlement[];
}

export interface GraceTokenHeader {
  readonly alg: 'EdDSA';
  readonly typ: 'JWT';
  /**
   * The signing key's id (crypto/key-set.ts). Tokens from before key ids carry the key's
   * row id (a UUID) here; a verifier tries every key of its set for those.
   */
  readonly kid: string;
}

/** How far a verifier's clock may lag the issuer's for `nbf`; `exp` gets no leeway. */
export const NOT_BEFORE_LEEWAY_SECONDS = 300;

export function encodeGraceToken(claims: GraceTokenClaims, keyId: string, sign: (message: Uint8Array) => Uint8Array): string {
  const header: GraceTokenHeader = { alg: 'EdDSA', typ: 'JWT', kid: keyId };
  const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  return `${signingInput}.${Buffer.from(sign(Buffer.from(signingInput, 'ascii'))).toString('base64url')}`;
}

export interface VerifiedGraceToken {
  /** The header as signed: `alg` is `EdDSA` and `typ` is `JWT`; `kid` is absent from a token that names no key. */
  readonly header: Omit<GraceTokenHeader, 'kid'> & { readonly kid?: string };
  readonly claims: GraceTokenClaims;
}

/** The string claims a verifier requires, in the order of docs/grace-token.md's table. */
const STRING_CLAIMS = ['iss', 'sub', 'jti', 'license_id', 'license_key_prefix', 'license_type', 'hardware_id', 'license_valid_until'] as const;

/**
 * Checks the token as docs/grace-token.md "Verifying" says, step by step: the compact form
 * (canonical base64url parts), the header (no repeated member, `alg` EdDSA, `typ` JWT, no
 * `crit`, a string `kid` if any), the signature with the key `kid` names, every claim of the
 * table (present, of its type), the time window and (when given) the hardware ID, compared
 * in Unicode NFC as for `.lic` files. Every failure is a LicenseServerError:
 * GRACE_TOKEN_INVALID for anything malformed, tampered with or not valid yet,
 * GRACE_TOKEN_EXPIRED past `exp`, HARDWARE_MISMATCH for another machine.
 *
 * Options: `now` (default: the system clock) is the time the window is checked at;
 * `hardwareId`, when given, is this machine's ID (when absent the binding is not checked).
 */
export function verifyGraceToken(
  token: string,
  publicKey: KeySetInput | KeySet,
  options: { now?: Date; hardwareId?: string; notBeforeLeewaySeconds?: number } = {},
): VerifiedGraceToken {
  const invalid = (reason: string): never => {
    throw new LicenseServerError('GRACE_TOKEN_INVALID', `grace token is invalid: ${reason}`);
  };
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) invalid('not a token');
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every(isCanonicalBase64url)) invalid('not a compact JWS');
  const [headerPart, claimsPart, signaturePart] = parts as [string, string, string];

  const header = parseJsonObject(headerPart, 'header', invalid);
  if (header.alg !== 'EdDSA') invalid('the algorithm is not EdDSA');
  if (header.typ !== 'JWT') invalid('the header\'s "typ" is not "JWT"');
  // RFC 7515 section 4.1.11: an extension the verifier does not know must not be ignored, and it knows none.
  if ('crit' in header) invalid('the header has "crit": no extension is understood');
  if ('kid' in header && typeof header.kid !== 'string') invalid('the header\'s "kid" is not a string');

  const signature = Buffer.from(signaturePart, 'base64url');
  if (signature.length !== 64) invalid('the signature is not 64 bytes');
  const set = asKeySet(publicKey);
  const { keys, unknown } = keysFor(set, header.kid as string | undefined);
  if (unknown !== undefined) invalid(`signature verification failed: ${describeUnknownKey(unknown, set)}`);
  const signed = Buffer.from(`${headerPart}.${claimsPart}`, 'ascii');
  if (!keys.some((key) => verifyEd25519(signature, signed, key.publicKey))) invalid('signature verification failed');

  const claims = parseJsonObject(claimsPart, 'claims', invalid);
  const claim = (name: string, type: string, holds: (value: unknown) => boolean): void => {
    if (!(name in claims)) invalid(`"${name}" is missing`);
    if (!holds(claims[name])) invalid(`"${name}" is not ${type}`);
  };
  for (const name of ['iat', 'nbf', 'exp']) claim(name, 'an integer', Number.isSafeInteger);
  for (const name of STRING_CLAIMS) claim(name, 'a string', (value) => typeof value === 'string');
  claim('entitlements', 'an array', Array.isArray);

  const seconds = Math.floor((options.now ?? new Date()).getTime() / 1000);
  // A client whose clock lags the server's a little must be able to use a token at once.
  const leeway = options.notBeforeLeewaySeconds ?? NOT_BEFORE_LEEWAY_SECONDS;
  if (seconds + leeway < (claims.nbf as number)) invalid('it is not valid yet (check the clock)');
  if (seconds >= (claims.exp as number)) {
    throw new LicenseServerError('GRACE_TOKEN_EXPIRED', `grace period expired at ${new Date((claims.exp as number) * 1000).toISOString()}`);
  }
  // One machine, whichever Unicode form its ID arrives in (the server writes NFC).
  if (options.hardwareId !== undefined && (claims.hardware_id as string).normalize('NFC') !== options.hardwareId.normalize('NFC')) {
    throw new LicenseServerError('HARDWARE_MISMATCH', 'hardware ID mismatch');
  }
  return { header: header as unknown as VerifiedGraceToken['header'], claims: claims as unknown as GraceTokenClaims };
}

/** Longer than any token the server writes by far; refused before any parsing. */
const MAX_TOKEN_LENGTH = 16_384;

/**
 * RFC 4648 section 5 without padding, and only the canonical encoding of its bytes: a
 * length that is not 1 more than a multiple of 4, and zero unused low bits in the last
 * character (Node's decoder would ignore them), so one token has one spelling.
 */
function isCanonicalBase64url(part: string): boolean {
  return /^[A-Za-z0-9_-]+$/.test(part) && part.length % 4 !== 1 && Buffer.from(part, 'base64url').toString('base64url') === part;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * A part as a JSON object, refused unless its bytes are UTF-8 (not replaced) and no object
 * in it has a member twice: JSON.parse keeps the last of repeated members and other parsers
 * the first, so `{"alg":"none","alg":"EdDSA"}` would read differently in two verifiers.
 */
function parseJsonObject(part: string, what: 'header' | 'claims', invalid: (reason: string) => never): Record<string, unknown> {
  let text: string;
  let value: unknown;
  try {
    text = strictUtf8.decode(Buffer.from(part, 'base64url'));
    value = JSON.parse(text);
  } catch {
    return invalid(`the ${what} ${what === 'header' ? 'is' : 'are'} not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalid(`the ${what} ${what === 'header' ? 'is' : 'are'} not a JSON object`);
  const repeated = repeatedMember(text);
  if (repeated !== undefined) invalid(`the ${what} ${what === 'header' ? 'has' : 'have'} the member ${JSON.stringify(repeated)} twice`);
  return value as Record<string, unknown>;
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}
