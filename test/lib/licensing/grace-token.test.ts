import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { encodeGraceToken, verifyGraceToken, type GraceTokenClaims } from '../../../src/lib/licensing/grace-token.js';
import { publicKeyOf, signEd25519 } from '../../../src/lib/offline/ed25519.js';

const secretKey = Buffer.alloc(32, 7);
const publicKey = publicKeyOf(secretKey);
const iat = 1_800_000_000;
const claims: GraceTokenClaims = {
  iss: 'licenses.example.com', sub: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d', iat, nbf: iat, exp: iat + 72 * 3600, jti: 'j',
  license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d', license_key_prefix: '7KQ2-M9X', license_type: 'hybrid', hardware_id: 'hw',
  license_valid_until: '2027-01-01T00:00:00Z', entitlements: [{ code: 'seats', name: 'Seats', usage_limit: 5 }],
};
const token = encodeGraceToken(claims, 'key-1', (message) => signEd25519(message, secretKey));
const at = (seconds: number) => new Date(seconds * 1000);
const code = (work: () => unknown) => {
  try {
    work();
    return 'ACCEPTED';
  } catch (error) {
    return (error as { code?: string }).code;
  }
};

describe('grace tokens', () => {
  it('verify inside their window and carry the claims', () => {
    const verified = verifyGraceToken(token, publicKey, { now: at(iat + 10), hardwareId: 'hw' });
    assert.deepEqual(verified.claims, claims);
    assert.deepEqual(verified.header, { alg: 'EdDSA', typ: 'JWT', kid: 'key-1' });
  });

  it('allow a lagging clock five minutes on nbf, and none on exp', () => {
    assert.equal(code(() => verifyGraceToken(token, publicKey, { now: at(iat - 299) })), 'ACCEPTED');
    assert.equal(code(() => verifyGraceToken(token, publicKey, { now: at(iat - 301) })), 'GRACE_TOKEN_INVALID');
    assert.equal(code(() => verifyGraceToken(token, publicKey, { now: at(claims.exp - 1) })), 'ACCEPTED');
    assert.equal(code(() => verifyGraceToken(token, publicKey, { now: at(claims.exp) })), 'GRACE_TOKEN_EXPIRED');
  });

  it('refuse another machine, another key, another algorithm and any changed byte', () => {
    const now = at(iat + 10);
    assert.equal(code(() => verifyGraceToken(token, publicKey, { now, hardwareId: 'other' })), 'HARDWARE_MISMATCH');
    assert.equal(code(() => verifyGraceToken(token, publicKeyOf(Buffer.alloc(32, 8)), { now })), 'GRACE_TOKEN_INVALID');
    const [h, c, s] = token.split('.');
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${c}.`;
    assert.equal(code(() => verifyGraceToken(none, publicKey, { now })), 'GRACE_TOKEN_INVALID');
    const hs = `${Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url')}.${c}.${s}`;
    assert.equal(code(() => verifyGraceToken(hs, publicKey, { now })), 'GRACE_TOKEN_INVALID');
    for (let i = 0; i < token.length; i += 7) {
      const changed = token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
      if (changed !== token) assert.notEqual(code(() => verifyGraceToken(changed, publicKey, { now })), 'ACCEPTED', `position ${i}`);
    }
    assert.equal(code(() => verifyGraceToken(`${h}.${c}`, publicKey, { now })), 'GRACE_TOKEN_INVALID');
    assert.equal(code(() => verifyGraceToken('', publicKey, { now })), 'GRACE_TOKEN_INVALID');
  });

  describe('the worked example of docs/grace-token.md (test/vectors/grace-token.json)', () => {
    const vectors = new URL('../../vectors/', import.meta.url);
    const vector = JSON.parse(readFileSync(new URL('grace-token.json', vectors), 'utf8'));
    const lic = JSON.parse(readFileSync(new URL('offline-license-v1.json', vectors), 'utf8'));
    const keySet = readFileSync(new URL('key-set.pem', vectors), 'utf8');
    const inWindow = new Date('2026-11-23T10:00:00Z');

    it('is what encodeGraceToken writes with the rotated key, names it as kid, and the doc quotes it', () => {
      const claims = JSON.parse(vector.claims_json) as GraceTokenClaims;
      const again = encodeGraceToken(claims, lic.second_key_id, (message) => signEd25519(message, Buffer.from(lic.second_secret_key_hex, 'hex')));
      assert.equal(again, vector.token);
      assert.deepEqual(JSON.parse(vector.header_json), { alg: 'EdDSA', typ: 'JWT', kid: lic.second_key_id });
      const doc = readFileSync(new URL('../../../docs/grace-token.md', import.meta.url), 'utf8');
      for (const part of [vector.token, vector.header_json, vector.claims_json, JSON.stringify(vector.jwks)]) assert.ok(doc.includes(part));
    });

    it('verifies with the key set, and fails with only the other key, naming the key id', () => {
      assert.equal(verifyGraceToken(vector.token, keySet, { now: inWindow }).claims.license_id, 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d');
      assert.throws(
        () => verifyGraceToken(vector.token, lic.public_key_pem, { now: inWindow }),
        (error: Error & { code?: string }) => error.code === 'GRACE_TOKEN_INVALID' && error.message.includes(`it is signed by key ${lic.second_key_id}`),
      );
    });

    it('verifies with jose given the JWK Set, which picks the key by kid', async () => {
      const { createLocalJWKSet, jwtVerify } = await import('jose');
      const { payload, protectedHeader } = await jwtVerify(vector.token, createLocalJWKSet(vector.jwks), { currentDate: inWindow, algorithms: ['EdDSA'] });
      assert.equal(protectedHeader.kid, lic.second_key_id);
      assert.equal(payload.sub, 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d');
    });
  });
});
