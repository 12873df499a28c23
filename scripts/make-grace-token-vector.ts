// Writes the known-answer vector of a grace token signed by a rotated key
// (docs/grace-token.md, "Worked example"): `node --import tsx scripts/make-grace-token-vector.ts`.
// Ed25519 is deterministic, so the token is fixed; test/lib/licensing/grace-token.test.ts
// checks the code and jose (with the JWK Set) against it, and the verifiers (Node's and the
// Go client's) against the tokens of "accepted" and "refused", signed by the same key but
// written otherwise than the server writes them.
import { readFileSync, writeFileSync } from 'node:fs';
import { encodeGraceToken, type GraceTokenClaims } from '../src/lib/licensing/grace-token.js';
import { signEd25519 } from '../src/lib/offline/ed25519.js';

const lic = JSON.parse(readFileSync(new URL('../test/vectors/offline-license-v1.json', import.meta.url), 'utf8'));
const secretKey = Buffer.from(lic.second_secret_key_hex, 'hex');
const iat = 1_795_341_600; // 2026-11-22T10:00:00Z
const claims: GraceTokenClaims = {
  iss: 'licenses.example.com',
  sub: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d',
  iat,
  nbf: iat,
  exp: iat + 72 * 3600,
  jti: '5f0d7a1e-2c3b-4e8e-9c2b-0b6c4f8e3a1d',
  license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d',
  license_key_prefix: '7KQ2-M9X',
  license_type: 'hybrid',
  hardware_id: 'HW-4f2a-9c1e-ü',
  license_valid_until: '2026-12-31T23:59:59Z',
  entitlements: [{ code: 'export', name: 'Export reports', usage_limit: null }, { code: 'seats', name: 'Seats', usage_limit: 25 }],
};
const sign = (message: Uint8Array) => signEd25519(message, secretKey);
const token = encodeGraceToken(claims, lic.second_key_id, sign);
const [header, payload] = token.split('.');

const headerJson = Buffer.from(header!, 'base64url').toString('utf8');
const claimsJson = Buffer.from(payload!, 'base64url').toString('utf8');
const b64url = (text: string | Uint8Array) => Buffer.from(text).toString('base64url');
/** A token over exactly these header and claims texts, which JSON.stringify would not write. */
const signRaw = (headerText: string | Uint8Array, claimsText: string | Uint8Array) => {
  const input = `${b64url(headerText)}.${b64url(claimsText)}`;
  return `${input}.${b64url(sign(Buffer.from(input, 'ascii')))}`;
};
const withClaims = (from: string, to: string) => {
  if (!claimsJson.includes(from)) throw new Error(`the claims do not hold ${from}`);
  return claimsJson.replace(from, to);
};
const withHeader = (to: string) => headerJson.replace('{"alg":"EdDSA","typ":"JWT",', to);

/**
 * Tokens a verifier accepts although the server does not write them so: numbers whose value is
 * an integer written with a fraction or an exponent (read as IEEE 754 doubles), a header
 * without kid (every key of the set is tried), members the format does not define (ignored).
 */
const accepted = [
  ['iat-with-a-fraction-and-exp-with-an-exponent', signRaw(headerJson, withClaims('"iat":1795341600,', '"iat":1795341600.0,').replace('"exp":1795600800,', '"exp":1.7956008E9,'))],
  ['no-kid', signRaw('{"alg":"EdDSA","typ":"JWT"}', claimsJson)],
  ['members-not-in-the-tables', signRaw(withHeader('{"alg":"EdDSA","typ":"JWT","x-note":"ignored",'), withClaims('"iss":', '"x-note":{"a":[1,2]},"iss":'))],
].map(([name, token]) => ({ name, token, iat: iat, exp: iat + 72 * 3600 }));

/** Tokens signed by the same key that break docs/grace-token.md: a verifier refuses each, with this message. */
const broken: Array<[string, Record<string, unknown>, string]> = [
  ['no-iss', { iss: undefined }, '"iss" is missing'],
  ['no-jti', { jti: undefined }, '"jti" is missing'],
  ['no-license_key_prefix', { license_key_prefix: undefined }, '"license_key_prefix" is missing'],
  ['iss-null', { iss: null }, '"iss" is not a string'],
  ['jti-a-number', { jti: 42 }, '"jti" is not a string'],
  ['license_key_prefix-an-array', { license_key_prefix: ['7KQ2-M9X'] }, '"license_key_prefix" is not a string'],
  ['iat-a-string', { iat: String(iat) }, '"iat" is not an integer'],
  ['entitlements-an-object', { entitlements: {} }, '"entitlements" is not an array'],
  ['not-valid-yet', { nbf: iat + 86_400 + 301 }, 'it is not valid yet (check the clock)'],
];
const good = token.split('.') as [string, string, string];
/** A part's last character with a nonzero unused low bit: the same bytes, spelled otherwise. */
const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const sloppy = (part: string) => part.slice(0, -1) + alphabet[alphabet.indexOf(part.at(-1)!) ^ 1]!;
const sloppySignature = sloppy(good[2]);
/** The header part spelled with a nonzero unused bit, and signed so: the signature is good, the spelling is not. */
const sloppyHeaderInput = `${sloppy(good[0])}.${good[1]}`;
const sloppyHeader = `${sloppyHeaderInput}.${b64url(sign(Buffer.from(sloppyHeaderInput, 'ascii')))}`;
// A byte 0xFF inside the "iss" string: never UTF-8. A decoder that replaces it would read JSON.
const issEnd = Buffer.from(claimsJson, 'utf8').indexOf('licenses.example.com') + 'licenses.example.com'.length;
const notUtf8 = Buffer.concat([Buffer.from(claimsJson, 'utf8').subarray(0, issEnd), Buffer.of(0xff), Buffer.from(claimsJson, 'utf8').subarray(issEnd)]);
const raw: Array<[string, string, string]> = [
  ['iat-a-fraction', signRaw(headerJson, withClaims('"iat":1795341600,', '"iat":1795341600.5,')), '"iat" is not an integer'],
  ['exp-past-2^53', signRaw(headerJson, withClaims('"exp":1795600800,', '"exp":9007199254740992,')), '"exp" is not an integer'],
  ['claims-exp-twice', signRaw(headerJson, withClaims('"exp":1795600800,', '"exp":1795600800,"exp":1795600800,')), 'the claims have the member "exp" twice'],
  ['claims-code-twice-in-an-entitlement', signRaw(headerJson, withClaims('{"code":"seats",', '{"code":"seats","code":"seats",')), 'the claims have the member "code" twice'],
  ['claims-not-utf-8', signRaw(headerJson, notUtf8), 'the claims are not JSON'],
  ['claims-with-a-byte-order-mark', signRaw(headerJson, Buffer.concat([Buffer.of(0xef, 0xbb, 0xbf), Buffer.from(claimsJson, 'utf8')])), 'the claims are not JSON'],
  ['claims-an-array', signRaw(headerJson, `[${claimsJson}]`), 'the claims are not a JSON object'],
  ['header-alg-twice', signRaw(withHeader('{"alg":"none","alg":"EdDSA","typ":"JWT",'), claimsJson), 'the header has the member "alg" twice'],
  ['header-without-typ', signRaw(withHeader('{"alg":"EdDSA",'), claimsJson), 'the header\'s "typ" is not "JWT"'],
  ['header-typ-at+jwt', signRaw(withHeader('{"alg":"EdDSA","typ":"at+jwt",'), claimsJson), 'the header\'s "typ" is not "JWT"'],
  ['header-with-crit', signRaw(withHeader('{"alg":"EdDSA","typ":"JWT","crit":["exp"],"exp":0,'), claimsJson), 'the header has "crit": no extension is understood'],
  ['header-kid-a-number', signRaw('{"alg":"EdDSA","typ":"JWT","kid":7}', claimsJson), 'the header\'s "kid" is not a string'],
  ['signature-with-nonzero-unused-bits', `${good[0]}.${good[1]}.${sloppySignature}`, 'not a compact JWS'],
  ['header-with-nonzero-unused-bits', sloppyHeader, 'not a compact JWS'],
  ['signature-padded', `${token}==`, 'not a compact JWS'],
];
const refused = [
  ...broken.map(([name, change, reason]) => ({
    name,
    // JSON.stringify leaves out a member whose value is undefined.
    token: encodeGraceToken({ ...claims, ...change } as unknown as GraceTokenClaims, lic.second_key_id, sign),
    message: reason,
  })),
  ...raw.map(([name, token, reason]) => ({ name, token, message: reason })),
].map(({ name, token, message }) => ({ name, token, code: 'GRACE_TOKEN_INVALID', message: `grace token is invalid: ${message}` }));
const out = {
  description: 'A grace token signed by the key a server rotated to (RFC 8032 TEST 2), verified with test/vectors/key-set.pem (docs/grace-token.md).',
  key_id: lic.second_key_id,
  header_json: headerJson,
  claims_json: claimsJson,
  token,
  hardware_id: claims.hardware_id,
  // The same machine's ID in decomposed form (u U+0308): a verifier that compares NFC forms accepts it.
  nfc_equivalent_hardware_id: claims.hardware_id.normalize('NFD'),
  // Every token of "accepted" and "refused" is checked at this time, without a hardware ID.
  verified_at: '2026-11-23T10:00:00Z',
  accepted,
  refused,
  jwks: {
    keys: [lic.second_public_key_hex, lic.public_key_hex].map((hex: string, i: number) => ({
      kty: 'OKP', crv: 'Ed25519', x: Buffer.from(hex, 'hex').toString('base64url'), kid: i === 0 ? lic.second_key_id : lic.key_id, use: 'sig', alg: 'EdDSA',
    })),
  },
};
writeFileSync(new URL('../test/vectors/grace-token.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
console.log(out.token);
