// Writes the known-answer vector of a private signing key sealed at rest
// (docs/backup-format.md, "Signing keys"): `node --import tsx scripts/make-sealed-key-vector.ts`.
// The committed output is the contract; test/lib/signing-keys/protection.test.ts checks the
// code and an independent AES-GCM (@noble/ciphers) against it.
import { writeFileSync } from 'node:fs';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { keyIdOf } from '../src/lib/crypto/key-set.js';
import { publicKeyOf } from '../src/lib/offline/ed25519.js';
import { kekIdOf, sealSecretKey } from '../src/lib/signing-keys/protection.js';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
// RFC 8032 section 7.1, TEST 1, the key of the .lic vectors.
const seed = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
const kek = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
const nonce = Buffer.from('b0b1b2b3b4b5b6b7b8b9babb', 'hex');
const keyId = keyIdOf(publicKeyOf(seed));
const out = {
  description: 'A private signing key sealed at rest under a key-encryption key (docs/backup-format.md, "Signing keys").',
  seed_hex: hex(seed),
  key_id: keyId,
  kek_hex: hex(kek),
  kek_id: kekIdOf(kek),
  kek_id_label: 'license-server/v1/signing-kek-id',
  sealing_info: 'license-server/v1/signing-key-seal',
  sealing_key_hex: hex(hkdf(sha256, kek, new Uint8Array(0), new TextEncoder().encode('license-server/v1/signing-key-seal'), 32)),
  nonce_hex: hex(nonce),
  sealed_hex: hex(sealSecretKey(seed, kek, keyId, nonce)),
};
writeFileSync(new URL('../test/vectors/sealed-signing-key.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
console.log(out);
