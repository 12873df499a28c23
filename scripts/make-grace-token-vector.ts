// Writes the known-answer vector of a grace token signed by a rotated key
// (docs/grace-token.md, "Worked example"): `node --import tsx scripts/make-grace-token-vector.ts`.
// Ed25519 is deterministic, so the token is fixed; test/lib/licensing/grace-token.test.ts
// checks the code and jose (with the JWK Set) against it, and the verifiers against the
// tokens in "refused", signed by the same key with a required claim missing or mistyped.
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

/** Tokens signed by the same key whose claims break docs/grace-token.md: a verifier refuses each. */
const broken: Array<[string, Record<string, unknown>, string]> = [
  ['no-iss', { iss: undefined }, '"iss" is missing'],
  ['no-jti', { jti: undefined }, '"jti" is missing'],
  ['no-license_key_prefix', { license_key_prefix: undefined }, '"license_key_prefix" is missing'],
  ['iss-null', { iss: null }, '"iss" is missing'],
  ['jti-a-number', { jti: 42 }, '"jti" is missing'],
  ['license_key_prefix-an-array', { license_key_prefix: ['7KQ2-M9X'] }, '"license_key_prefix" is missing'],
];
const refused = broken.map(([name, change, reason]) => ({
  name,
  // JSON.stringify leaves out a member whose value is undefined.
  token: encodeGraceToken({ ...claims, ...change } as unknown as GraceTokenClaims, lic.second_key_id, sign),
  code: 'GRACE_TOKEN_INVALID',
  message: `grace token is invalid: ${reason}`,
}));
const out = {
  description: 'A grace token signed by the key a server rotated to (RFC 8032 TEST 2), verified with test/vectors/key-set.pem (docs/grace-token.md).',
  key_id: lic.second_key_id,
  header_json: Buffer.from(header!, 'base64url').toString('utf8'),
  claims_json: Buffer.from(payload!, 'base64url').toString('utf8'),
  token,
  hardware_id: claims.hardware_id,
  // The same machine's ID in decomposed form (u U+0308): a verifier that compares NFC forms accepts it.
  nfc_equivalent_hardware_id: claims.hardware_id.normalize('NFD'),
  refused,
  jwks: {
    keys: [lic.second_public_key_hex, lic.public_key_hex].map((hex: string, i: number) => ({
      kty: 'OKP', crv: 'Ed25519', x: Buffer.from(hex, 'hex').toString('base64url'), kid: i === 0 ? lic.second_key_id : lic.key_id, use: 'sig', alg: 'EdDSA',
    })),
  },
};
writeFileSync(new URL('../test/vectors/grace-token.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
console.log(out.token);
