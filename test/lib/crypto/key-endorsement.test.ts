import assert from 'node:assert/strict';
import { createPrivateKey, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { offeredKeysOf } from '../../../src/client/key-refresh.js';
import { acceptOfferedKeys, endorsementStatement, fingerprintOf, verifyEndorsement } from '../../../src/lib/crypto/key-endorsement.js';
import { keyIdOf } from '../../../src/lib/crypto/key-set.js';

const vectors = JSON.parse(readFileSync(new URL('../../vectors/key-endorsement.json', import.meta.url), 'utf8'));
const key = (name: string) => ({ keyId: vectors.keys[name].key_id as string, publicKey: new Uint8Array(Buffer.from(vectors.keys[name].public_key_hex, 'hex')) });

/** The vectors of docs/public-keys.md, which clients/go/offline/endorsement_test.go reads too. */
describe('key endorsements (test/vectors/key-endorsement.json)', () => {
  it('pins the key ids, fingerprints, statement bytes and signature; node:crypto signs the same bytes', () => {
    for (const name of Object.keys(vectors.keys)) {
      const { publicKey } = key(name);
      assert.equal(keyIdOf(publicKey), vectors.keys[name].key_id);
      assert.equal(fingerprintOf(publicKey), vectors.keys[name].fingerprint);
    }
    const { signer, subject, statement, statement_hex: hex, signature } = vectors.endorsement;
    const bytes = endorsementStatement(key(subject).publicKey);
    assert.equal(Buffer.from(bytes).toString('utf8'), statement);
    assert.equal(Buffer.from(bytes).toString('hex'), hex);
    assert.equal(statement, `license-server key endorsement v1\n${key(subject).keyId}\n${Buffer.from(key(subject).publicKey).toString('base64url')}`);
    const seed = Buffer.from(vectors.keys[signer].seed_hex, 'hex');
    const pkcs8 = createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' });
    assert.equal(sign(null, bytes, pkcs8).toString('base64url'), signature);
    assert.equal(verifyEndorsement(key(signer).publicKey, key(subject).publicKey, Buffer.from(signature, 'base64url')), true);
    assert.equal(verifyEndorsement(key(subject).publicKey, key(subject).publicKey, Buffer.from(signature, 'base64url')), false, 'another signer');
    assert.equal(verifyEndorsement(key(signer).publicKey, key('C').publicKey, Buffer.from(signature, 'base64url')), false, 'another subject');
  });

  for (const c of vectors.trust) {
    it(`trust rule: ${c.name}`, () => {
      const trusted = c.trusted.map(key);
      const allowed = c.allowed.map((a: any) => ({ keyId: a.key_id, fingerprint: a.fingerprint }));
      assert.deepEqual(acceptOfferedKeys(trusted, offeredKeysOf(c.offered), allowed).map((k) => k.keyId), c.accepted);
    });
  }
});
