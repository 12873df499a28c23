import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, createPublicKey, hkdfSync, verify as nodeVerify } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gcm } from '@noble/ciphers/aes.js';
import { publicKeyToPem } from '../../../src/lib/crypto/ed25519-pem.js';
import { keyIdOf, parseKeySet } from '../../../src/lib/crypto/key-set.js';
import type { LicenseServerError } from '../../../src/lib/errors.js';
import { BINDING_INFO, deriveBindingKey, sealDecryptionKey, unsealDecryptionKey } from '../../../src/lib/offline/binding.js';
import { publicKeyOf, signEd25519 } from '../../../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, decodeLicenseFile, encodeLicenseFile, type LicenseFilePayload } from '../../../src/lib/offline/format.js';
import { LicenseSigner } from '../../../src/lib/signing-keys/signer.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';

interface Vector {
  name: string;
  payload: LicenseFilePayload;
  canonical_payload: string;
  canonical_payload_hex: string;
  signature_base64: string;
  file: string;
  /** The key that signed it when it is not the RFC 8032 TEST 1 key. */
  secret_key_hex?: string;
  binding?: { hardware_id: string; info: string; binding_key_hex: string; decryption_key_hex: string; nonce_hex: string };
}

const vectorsUrl = new URL('../../vectors/', import.meta.url);
const data = JSON.parse(readFileSync(new URL('offline-license-v1.json', vectorsUrl), 'utf8')) as {
  signing_secret_key_hex: string;
  public_key_hex: string;
  public_key_pem: string;
  key_id: string;
  second_public_key_hex: string;
  second_key_id: string;
  key_set_pem: string;
  vectors: Vector[];
};
const secretKey = Buffer.from(data.signing_secret_key_hex, 'hex');
const keyOf = (vector: Vector) => (vector.secret_key_hex ? Buffer.from(vector.secret_key_hex, 'hex') : secretKey);
const pemOf = (vector: Vector) => publicKeyToPem(publicKeyOf(keyOf(vector)));
const inWindow = new Date('2026-11-22T12:00:00Z');

describe('.lic format v1 known-answer vectors', () => {
  it('use the RFC 8032 test key, whose PEM is what publicKeyToPem and node:crypto both give', () => {
    assert.equal(data.public_key_hex, 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a');
    assert.equal(Buffer.from(publicKeyOf(secretKey)).toString('hex'), data.public_key_hex);
    assert.equal(publicKeyToPem(Buffer.from(data.public_key_hex, 'hex')), data.public_key_pem);
    assert.equal(createPublicKey(data.public_key_pem).export({ type: 'spki', format: 'pem' }), data.public_key_pem);
    assert.equal(readFileSync(new URL('signing-key.pem', vectorsUrl), 'utf8'), data.public_key_pem);
  });

  it('include a customer name with &, <, ", a backslash, non-ASCII letters and an emoji', () => {
    const name = data.vectors[0]!.payload.customer_name;
    for (const part of ['&', '<', '"', '\\', 'ü', '🚀']) assert.ok(name.includes(part), part);
  });

  it('name each key by the first 16 hex digits of SHA-256 of its raw public key, and hold both in key-set.pem', () => {
    const first = createHash('sha256').update(Buffer.from(data.public_key_hex, 'hex')).digest('hex').slice(0, 16);
    const second = createHash('sha256').update(Buffer.from(data.second_public_key_hex, 'hex')).digest('hex').slice(0, 16);
    assert.deepEqual([data.key_id, data.second_key_id], [first, second]);
    assert.deepEqual([keyIdOf(Buffer.from(data.public_key_hex, 'hex')), keyIdOf(Buffer.from(data.second_public_key_hex, 'hex'))], [first, second]);
    assert.equal(readFileSync(new URL('key-set.pem', vectorsUrl), 'utf8'), data.key_set_pem);
    assert.deepEqual(parseKeySet(data.key_set_pem).map((key) => key.keyId), [second, first]);
    const rotated = data.vectors.find((vector) => vector.name === 'rotated-key')!;
    assert.equal(rotated.payload.key_id, second);
  });

  it('fail a file whose key_id is not in the key set given, naming the key id', () => {
    const rotated = data.vectors.find((vector) => vector.name === 'rotated-key')!;
    assert.throws(
      () => verifyLicenseFile(rotated.file, { publicKey: data.public_key_pem, now: inWindow }),
      (error: LicenseServerError) => error.code === 'SIGNATURE_INVALID' && error.message.includes(`signed by key ${data.second_key_id}`) && error.message.includes(data.key_id),
    );
  });

  for (const vector of data.vectors) {
    describe(vector.name, () => {
      it('canonicalises the payload to the exact bytes (RFC 8785)', () => {
        const bytes = canonicalPayloadBytes(vector.payload);
        assert.equal(Buffer.from(bytes).toString('hex'), vector.canonical_payload_hex);
        assert.equal(Buffer.from(bytes).toString('utf8'), vector.canonical_payload);
      });

      it('signs to the same bytes with @noble/curves and with node:crypto, on the event loop and off it', async () => {
        const message = canonicalPayloadBytes(vector.payload);
        const noble = Buffer.from(signEd25519(message, keyOf(vector))).toString('base64');
        const signer = LicenseSigner.fromSecretKey('vector', keyOf(vector), publicKeyOf(keyOf(vector)));
        const node = Buffer.from(signer.sign(message)).toString('base64');
        assert.equal(noble, vector.signature_base64);
        assert.equal(node, vector.signature_base64);
        assert.equal(Buffer.from(await signer.signAsync(message)).toString('base64'), vector.signature_base64);
        assert.ok(nodeVerify(null, message, createPublicKey(pemOf(vector)), Buffer.from(vector.signature_base64, 'base64')));
      });

      it('encodes to the exact file bytes kept in test/vectors, and decodes back', () => {
        const file = encodeLicenseFile(vector.payload, Buffer.from(vector.signature_base64, 'base64'));
        assert.equal(file, vector.file);
        assert.equal(readFileSync(new URL(`${vector.name}.lic`, vectorsUrl), 'utf8'), vector.file);
        const decoded = decodeLicenseFile(file);
        assert.deepEqual(decoded.payload, vector.payload);
        assert.equal(Buffer.from(decoded.signedBytes).toString('hex'), vector.canonical_payload_hex);
      });

      it('verifies with OpenSSL (pkeyutl -rawin) over the canonical bytes', () => {
        const dir = mkdtempSync(path.join(tmpdir(), 'license-vectors-'));
        try {
          writeFileSync(path.join(dir, 'key.pem'), pemOf(vector));
          writeFileSync(path.join(dir, 'data'), Buffer.from(vector.canonical_payload_hex, 'hex'));
          writeFileSync(path.join(dir, 'sig'), Buffer.from(vector.signature_base64, 'base64'));
          const out = execFileSync('openssl', ['pkeyutl', '-verify', '-pubin', '-inkey', 'key.pem', '-rawin', '-in', 'data', '-sigfile', 'sig'], { cwd: dir, encoding: 'utf8' });
          assert.match(out, /Signature Verified Successfully/);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });

      it('passes the offline verification inside its validity window, with its own key and with the key set', () => {
        for (const publicKey of [pemOf(vector), data.key_set_pem]) {
          const verified = verifyLicenseFile(vector.file, { publicKey, hardwareId: vector.binding?.hardware_id, now: inWindow });
          assert.equal(verified.hardwareChecked, true);
        }
        const verified = verifyLicenseFile(vector.file, { publicKey: data.key_set_pem, hardwareId: vector.binding?.hardware_id, now: inWindow });
        if (vector.binding) assert.equal(Buffer.from(verified.decryptionKey!).toString('hex'), vector.binding.decryption_key_hex);
      });

      if (vector.binding) {
        const binding = vector.binding;
        it('derives the binding key with HKDF-SHA256 the same in @noble/hashes and node:crypto', () => {
          assert.equal(binding.info, BINDING_INFO);
          const noble = Buffer.from(deriveBindingKey(binding.hardware_id, vector.payload.license_id)).toString('hex');
          const node = Buffer.from(hkdfSync('sha256', Buffer.from(binding.hardware_id, 'utf8'), Buffer.from(vector.payload.license_id, 'utf8'), Buffer.from(binding.info, 'utf8'), 32)).toString('hex');
          assert.equal(noble, binding.binding_key_hex);
          assert.equal(node, binding.binding_key_hex);
        });

        it('seals the decryption key with AES-256-GCM the same in node:crypto and @noble/ciphers', () => {
          const key = Buffer.from(binding.decryption_key_hex, 'hex');
          const nonce = Buffer.from(binding.nonce_hex, 'hex');
          const sealed = sealDecryptionKey(key, binding.hardware_id, vector.payload.license_id, nonce);
          assert.equal(sealed, vector.payload.encrypted_key);
          const noble = gcm(Buffer.from(binding.binding_key_hex, 'hex'), nonce).encrypt(key);
          assert.equal(Buffer.concat([nonce, noble]).toString('base64'), vector.payload.encrypted_key);
          assert.equal(Buffer.from(unsealDecryptionKey(sealed, binding.hardware_id, vector.payload.license_id)).toString('hex'), binding.decryption_key_hex);
        });
      }
    });
  }
});

