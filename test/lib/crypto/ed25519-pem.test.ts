import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { publicKeyFromPem, publicKeyToPem } from '../../../src/lib/crypto/ed25519-pem.js';

describe('Ed25519 public keys as PEM', () => {
  it('match what node:crypto exports for the same key, both ways', () => {
    for (let i = 0; i < 20; i += 1) {
      const { publicKey } = generateKeyPairSync('ed25519');
      const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
      assert.equal(publicKeyToPem(raw), pem);
      assert.deepEqual(Buffer.from(publicKeyFromPem(pem)), raw);
      assert.ok(createPublicKey(publicKeyToPem(raw)).equals(publicKey));
    }
  });

  it('refuse other keys and malformed input', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    assert.throws(() => publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString()), /not an Ed25519/);
    assert.throws(() => publicKeyFromPem('hello'), /PEM "PUBLIC KEY" block/);
    assert.throws(() => publicKeyToPem(new Uint8Array(31)), /32 bytes/);
  });
});
