// Writes the known-answer vectors of the .lic format (test/vectors/). Run once when the
// format is defined: `node --import tsx scripts/make-vectors.ts`. The committed output is
// then the contract; test/lib/offline/vectors.test.ts checks our code against it and
// against independent implementations (node:crypto, @noble/ciphers, OpenSSL).
import { writeFileSync } from 'node:fs';
import { publicKeyToPem } from '../src/lib/crypto/ed25519-pem.js';
import { keyIdOf } from '../src/lib/crypto/key-set.js';
import { deriveBindingKey, sealDecryptionKey } from '../src/lib/offline/binding.js';
import { publicKeyOf, signEd25519 } from '../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, encodeLicenseFile, type LicenseFilePayload } from '../src/lib/offline/format.js';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
// RFC 8032 section 7.1, TEST 1: a secret key whose public key anyone can look up.
const secretKey = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
const publicKey = publicKeyOf(secretKey);
// RFC 8032 section 7.1, TEST 2: the key a server rotated to, for the key-set vectors.
const secondSecretKey = Buffer.from('4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb', 'hex');
const secondPublicKey = publicKeyOf(secondSecretKey);
const customer = 'Müller & Söhne <GmbH> "Ωmega" \\ Zürich 🚀';

const common = {
  version: 1,
  license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d',
  license_key_prefix: '7KQ2-M9X',
  customer_name: customer,
  valid_from: '2026-01-01T00:00:00Z',
  valid_until: '2026-12-31T23:59:59Z',
  entitlements: [
    { code: 'export', name: 'Export reports', usage_limit: null },
    { code: 'seats', name: 'Seats', usage_limit: 25 },
  ],
  issued_at: '2026-11-22T10:00:00Z',
  issuer: 'licenses.example.com',
} as const;

const hardwareId = 'HW-4f2a-9c1e-ü';
const decryptionKey = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
const nonce = Buffer.from('a0a1a2a3a4a5a6a7a8a9aaab', 'hex');

const vectors: Array<{ name: string; payload: LicenseFilePayload; key?: Buffer; binding?: Record<string, string> }> = [
  { name: 'unbound', payload: { ...common, license_type: 'time_based', hardware_id: '' } as LicenseFilePayload },
  {
    name: 'bound-with-key',
    payload: {
      ...common,
      license_type: 'hybrid',
      hardware_id: hardwareId,
      encrypted_key: sealDecryptionKey(decryptionKey, hardwareId, common.license_id, nonce),
    } as LicenseFilePayload,
    binding: {
      hardware_id: hardwareId,
      info: 'license-server/v1/offline-decryption-key',
      binding_key_hex: hex(deriveBindingKey(hardwareId, common.license_id)),
      decryption_key_hex: hex(decryptionKey),
      nonce_hex: hex(nonce),
    },
  },
  // Signed by a key made by rotation: the file names it, and a verifier with a key set picks it.
  {
    name: 'rotated-key',
    payload: { ...common, license_type: 'time_based', hardware_id: '', key_id: keyIdOf(secondPublicKey) } as LicenseFilePayload,
    key: secondSecretKey,
  },
];

const out = {
  description: 'Known-answer vectors for the .lic format version 1 (docs/offline-license-format.md).',
  signing_secret_key_hex: hex(secretKey),
  public_key_hex: hex(publicKey),
  public_key_pem: publicKeyToPem(publicKey),
  key_id: keyIdOf(publicKey),
  second_secret_key_hex: hex(secondSecretKey),
  second_public_key_hex: hex(secondPublicKey),
  second_key_id: keyIdOf(secondPublicKey),
  key_set_pem: keySetPem(),
  vectors: vectors.map(({ name, payload, key, binding }) => {
    const canonical = canonicalPayloadBytes(payload);
    const signature = signEd25519(canonical, key ?? secretKey);
    const file = encodeLicenseFile(payload, signature);
    writeFileSync(new URL(`../test/vectors/${name}.lic`, import.meta.url), file);
    return {
      name,
      payload,
      canonical_payload: Buffer.from(canonical).toString('utf8'),
      canonical_payload_hex: hex(canonical),
      signature_base64: Buffer.from(signature).toString('base64'),
      file,
      ...(key ? { secret_key_hex: hex(key) } : {}),
      ...(binding ? { binding } : {}),
    };
  }),
};
writeFileSync(new URL('../test/vectors/offline-license-v1.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
writeFileSync(new URL('../test/vectors/signing-key.pem', import.meta.url), out.public_key_pem);
writeFileSync(new URL('../test/vectors/key-set.pem', import.meta.url), out.key_set_pem);

/** What `signing-key show --all` prints after one rotation: the active key first, each after a comment line. */
function keySetPem(): string {
  return [
    `# key_id ${keyIdOf(secondPublicKey)} active\n${publicKeyToPem(secondPublicKey)}`,
    `# key_id ${keyIdOf(publicKey)} verify-only\n${publicKeyToPem(publicKey)}`,
  ].join('');
}
console.log('wrote test/vectors/');
