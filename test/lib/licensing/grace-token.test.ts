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

  it('refuse a token without any one claim of the table in docs/grace-token.md, naming it, in the order step 4 gives', () => {
    const doc = readFileSync(new URL('../../../docs/grace-token.md', import.meta.url), 'utf8');
    const table = [...doc.matchAll(/^\| `([a-z_]+)` \| (?:string|integer|array) \|/gm)].map((m) => m[1]!);
    assert.deepEqual([...table].sort(), Object.keys(claims).sort(), 'the table lists the claims encodeGraceToken writes');
    const step4 = /^4\. Decode the claims;([\s\S]*?)^5\./m.exec(doc)![1]!;
    const order = [...step4.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!).filter((name) => table.includes(name));
    assert.deepEqual([...order].sort(), [...table].sort(), 'step 4 names every claim');
    const now = at(iat + 10);
    for (const [i, name] of order.entries()) {
      // Without this claim and every claim after it: the verifier names this one, so it checks in this order.
      const partial = Object.fromEntries(Object.entries(claims).filter(([key]) => !order.slice(i).includes(key)));
      const broken = encodeGraceToken(partial as unknown as GraceTokenClaims, 'key-1', (message) => signEd25519(message, secretKey));
      assert.throws(() => verifyGraceToken(broken, publicKey, { now }), { code: 'GRACE_TOKEN_INVALID', message: `grace token is invalid: "${name}" is missing` });
      // Of another type, it is named as such, not as missing.
      const type = name === 'entitlements' ? 'an array' : typeof claims[name as keyof GraceTokenClaims] === 'number' ? 'an integer' : 'a string';
      const mistyped = encodeGraceToken({ ...claims, [name]: name === 'entitlements' ? {} : type === 'an integer' ? String(iat) : 7 } as unknown as GraceTokenClaims, 'key-1', (message) => signEd25519(message, secretKey));
      assert.throws(() => verifyGraceToken(mistyped, publicKey, { now }), { code: 'GRACE_TOKEN_INVALID', message: `grace token is invalid: "${name}" is not ${type}` });
    }
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

    it('compares the hardware ID in Unicode NFC, as the .lic verifier does', () => {
      assert.notEqual(vector.nfc_equivalent_hardware_id, vector.hardware_id);
      assert.equal(vector.nfc_equivalent_hardware_id.normalize('NFC'), vector.hardware_id);
      assert.equal(JSON.parse(vector.claims_json).hardware_id, vector.hardware_id);
      for (const hardwareId of [vector.hardware_id, vector.nfc_equivalent_hardware_id]) {
        assert.equal(code(() => verifyGraceToken(vector.token, keySet, { now: inWindow, hardwareId })), 'ACCEPTED', JSON.stringify(hardwareId));
      }
      assert.equal(code(() => verifyGraceToken(vector.token, keySet, { now: inWindow, hardwareId: 'HW-4f2a-9c1e-u' })), 'HARDWARE_MISMATCH');
    });

    const verifiedAt = (): Date => new Date(vector.verified_at);

    it('accepts the tokens of "accepted": integers written with a fraction or an exponent, no kid, members the tables do not define', () => {
      assert.deepEqual(vector.accepted.map((accepted: { name: string }) => accepted.name), ['iat-with-a-fraction-and-exp-with-an-exponent', 'no-kid', 'members-not-in-the-tables']);
      assert.match(Buffer.from(vector.accepted[0].token.split('.')[1], 'base64url').toString('utf8'), /"iat":1795341600\.0,.*"exp":1\.7956008E9,/);
      // Step 4 says "integers": the doc says how a verifier reads them, naming these forms.
      const doc = readFileSync(new URL('../../../docs/grace-token.md', import.meta.url), 'utf8');
      const integers = /^\*\*Integers\*\*([\s\S]*?)\n\n/m.exec(doc)?.[1]?.replace(/\s+/g, ' ') ?? '';
      for (const form of ['`1795341600.0`', '`1.7956008E9`', '`1795341600.5`', '`9007199254740992`']) assert.ok(integers.includes(form), form);
      assert.match(integers, /as the IEEE 754 double it denotes/);
      for (const accepted of vector.accepted as Array<{ name: string; token: string; iat: number; exp: number }>) {
        const { claims } = verifyGraceToken(accepted.token, keySet, { now: verifiedAt() });
        assert.deepEqual([claims.iat, claims.exp, claims.license_id], [accepted.iat, accepted.exp, 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d'], accepted.name);
      }
    });

    it('refuses the tokens of "refused" with the message given there: a claim missing or of another type, a repeated member, a header against the rules, non-canonical base64url, not valid yet', async () => {
      const { createLocalJWKSet, jwtVerify } = await import('jose');
      assert.equal(vector.verified_at, '2026-11-23T10:00:00Z');
      const named = new Set<string>();
      for (const refused of vector.refused as Array<{ name: string; token: string; code: string; message: string }>) {
        assert.throws(
          () => verifyGraceToken(refused.token, keySet, { now: verifiedAt() }),
          (error: Error & { code?: string }) => error.code === refused.code && error.message === refused.message,
          refused.name,
        );
        const claim = /^grace token is invalid: "([a-z_]+)" is (?:missing|not (?:a string|an integer|an array))$/.exec(refused.message);
        if (claim) {
          // The signature is good: a JWT library that does not require these claims (or their types) accepts the token.
          if (refused.name !== 'iat-a-string') await jwtVerify(refused.token, createLocalJWKSet(vector.jwks), { currentDate: verifiedAt(), algorithms: ['EdDSA'] });
          named.add(claim[1]!);
        }
      }
      assert.deepEqual([...named].sort(), ['entitlements', 'exp', 'iat', 'iss', 'jti', 'license_key_prefix']);
      for (const part of ['missing', 'not a string', 'twice', '"typ" is not "JWT"', '"crit"', 'not valid yet', 'not a compact JWS']) {
        assert.ok((vector.refused as Array<{ message: string }>).some((refused) => refused.message.includes(part)), part);
      }
    });

    it('verifies with jose given the JWK Set, which picks the key by kid', async () => {
      const { createLocalJWKSet, jwtVerify } = await import('jose');
      const { payload, protectedHeader } = await jwtVerify(vector.token, createLocalJWKSet(vector.jwks), { currentDate: inWindow, algorithms: ['EdDSA'] });
      assert.equal(protectedHeader.kid, lic.second_key_id);
      assert.equal(payload.sub, 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d');
    });
  });
});
