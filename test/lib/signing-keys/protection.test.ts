import assert from 'node:assert/strict';
import { createHmac, hkdfSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gcm } from '@noble/ciphers/aes.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { kekIdOf, openSecretKey, sealSecretKey } from '../../../src/lib/signing-keys/protection.js';

const vector = JSON.parse(readFileSync(new URL('../../vectors/sealed-signing-key.json', import.meta.url), 'utf8'));
const doc = readFileSync(new URL('../../../docs/backup-format.md', import.meta.url), 'utf8');
const hex = (text: string) => Buffer.from(text, 'hex');

describe('private signing keys sealed at rest', () => {
  it('match the vector, recomputed with node:crypto and @noble/ciphers, and docs/backup-format.md quotes it', () => {
    const kek = hex(vector.kek_hex);
    assert.equal(createHmac('sha256', kek).update(vector.kek_id_label).digest('hex').slice(0, 16), vector.kek_id);
    assert.equal(kekIdOf(kek), vector.kek_id);
    const sealingKey = Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), Buffer.from(vector.sealing_info), 32));
    assert.equal(sealingKey.toString('hex'), vector.sealing_key_hex);
    const nonce = hex(vector.nonce_hex);
    const noble = gcm(sealingKey, nonce, Buffer.from(vector.key_id)).encrypt(hex(vector.seed_hex));
    assert.equal(Buffer.concat([nonce, noble]).toString('hex'), vector.sealed_hex);
    assert.equal(sealSecretKey(hex(vector.seed_hex), kek, vector.key_id, nonce).toString('hex'), vector.sealed_hex);
    assert.equal(Buffer.from(openSecretKey(hex(vector.sealed_hex), vector.kek_id, kek, vector.key_id)).toString('hex'), vector.seed_hex);
    for (const value of [vector.kek_id, vector.sealing_key_hex, vector.sealed_hex, vector.kek_hex, vector.nonce_hex, vector.kek_id_label, vector.sealing_info]) {
      assert.ok(doc.includes(value), value);
    }
  });

  it('tell a wrong key-encryption key from a damaged key, and refuse a sealed key moved to another key id', () => {
    const kek = hex(vector.kek_hex);
    const sealed = hex(vector.sealed_hex);
    const code = (work: () => unknown) => {
      try {
        work();
      } catch (error) {
        assert.ok(error instanceof LicenseServerError);
        assert.ok(!error.message.includes(vector.kek_hex) && !error.message.includes(vector.seed_hex));
        return error.code;
      }
      return 'opened';
    };
    assert.equal(code(() => openSecretKey(sealed, vector.kek_id, undefined, vector.key_id)), 'SIGNING_KEK_REQUIRED');
    assert.equal(code(() => openSecretKey(sealed, vector.kek_id, Buffer.alloc(32, 7), vector.key_id)), 'SIGNING_KEK_WRONG');
    const damaged = Buffer.from(sealed);
    damaged[20]! ^= 1;
    assert.equal(code(() => openSecretKey(damaged, vector.kek_id, kek, vector.key_id)), 'SIGNING_KEY_DAMAGED');
    assert.equal(code(() => openSecretKey(sealed, vector.kek_id, kek, '0000000000000000')), 'SIGNING_KEY_DAMAGED');
    assert.equal(code(() => openSecretKey(sealed, vector.kek_id, kek, vector.key_id)), 'opened');
  });
});
