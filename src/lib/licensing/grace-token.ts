import { describeUnknownKey, keysFor, type KeySet, type KeySetInput } from '../crypto/key-set.js';
import { LicenseServerError } from '../errors.js';
import { verifyEd25519 } from '../offline/ed25519.js';
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
  readonly header: GraceTokenHeader;
  readonly claims: GraceTokenClaims;
}

/** The string claims a verifier requires, in the order of docs/grace-token.md's table. */
const STRING_CLAIMS = ['iss', 'sub', 'jti', 'license_id', 'license_key_prefix', 'license_type', 'hardware_id', 'license_valid_until'] as const;

/**
 * Checks the signature, the algorithm, every claim of docs/grace-token.md (present, of its
 * type), the time window and (when given) the hardware ID, compared in Unicode NFC as for
 * `.lic` files. Every failure is a LicenseServerError: GRACE_TOKEN_INVALID for anything
 * malformed or tampered with, GRACE_TOKEN_EXPIRED past `exp`, HARDWARE_MISMATCH for
 * another machine.
 */
export function verifyGraceToken(
  token: string,
  publicKey: KeySetInput | KeySet,
  options: { now?: Date; hardwareId?: string; notBeforeLeewaySeconds?: number } = {},
): VerifiedGraceToken {
  const invalid = (reason: string): never => {
    throw new LicenseServerError('GRACE_TOKEN_INVALID', `grace token is invalid: ${reason}`);
  };
  if (typeof token !== 'string' || token.length > 16_384) invalid('not a token');
  const parts = token.split('.');
  if (parts.length !== 3 || parts.some((part) => !/^[A-Za-z0-9_-]+$/.test(part))) invalid('not a compact JWS');
  const [headerPart, claimsPart, signaturePart] = parts as [string, string, string];
  const header = parseJson(headerPart) ?? invalid('the header is not JSON');
  if (header.alg !== 'EdDSA') invalid('the algorithm is not EdDSA');
  const signature = Buffer.from(signaturePart, 'base64url');
  if (signature.toString('base64url') !== signaturePart || signature.length !== 64) invalid('the signature is not 64 bytes');
  const set = asKeySet(publicKey);
  const { keys, unknown } = keysFor(set, typeof header.kid === 'string' ? header.kid : undefined);
  if (unknown !== undefined) invalid(`signature verification failed: ${describeUnknownKey(unknown, set)}`);
  const signed = Buffer.from(`${headerPart}.${claimsPart}`, 'ascii');
  if (!keys.some((key) => verifyEd25519(signature, signed, key.publicKey))) invalid('signature verification failed');
  const claims = parseJson(claimsPart) ?? invalid('the claims are not JSON');
  for (const name of ['iat', 'nbf', 'exp']) {
    if (!Number.isSafeInteger(claims[name])) invalid(`"${name}" is missing`);
  }
  for (const name of STRING_CLAIMS) {
    if (typeof claims[name] !== 'string') invalid(`"${name}" is missing`);
  }
  if (!Array.isArray(claims.entitlements)) invalid('"entitlements" is missing');
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
  return { header: header as unknown as GraceTokenHeader, claims: claims as unknown as GraceTokenClaims };
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

function parseJson(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
