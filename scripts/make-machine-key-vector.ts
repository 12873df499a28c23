// Writes the known-answer vector of the machine-key form of a .lic file (format version 2,
// docs/offline-license-format.md section "The machine-key binding"):
// `node --import tsx scripts/make-machine-key-vector.ts`. The committed output is the
// contract; test/lib/offline/machine-key.test.ts, clients/go/offline/machinekey_test.go and
// test/clients/machine-key-reader.py (written from the document alone) check it.
import { createPrivateKey, sign } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { keyScheduleBase, encap, publicKeyOf } from '../src/lib/crypto/hpke.js';
import { canonicalPayloadText, encodeLicenseFile, type LicenseFilePayload } from '../src/lib/offline/format.js';
import { encodeMachineKey, machineKeyInfo, sealForMachine } from '../src/lib/offline/machine-key.js';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const v1 = JSON.parse(readFileSync(new URL('../test/vectors/offline-license-v1.json', import.meta.url), 'utf8'));
const bound = v1.vectors.find((vector: { name: string }) => vector.name === 'bound-with-key');

// The machine's key pair and the ephemeral key: the private keys of RFC 7748 section 6.1
// (Alice's as the machine's, Bob's as the checkout's ephemeral one), so that they are
// recognisably test keys. A real checkout draws the ephemeral key fresh every time.
const machinePrivate = Buffer.from('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a', 'hex');
const ephemeralPrivate = Buffer.from('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb', 'hex');
const machinePublic = publicKeyOf(machinePrivate);
const decryptionKey = Buffer.from(bound.binding.decryption_key_hex, 'hex');
const licenseId: string = bound.payload.license_id;
const hardwareId: string = bound.payload.hardware_id;

const info = machineKeyInfo(licenseId, hardwareId);
const { sharedSecret, enc } = encap(machinePublic, ephemeralPrivate);
const schedule = keyScheduleBase(sharedSecret, info);
const encryptedKey = sealForMachine(decryptionKey, machinePublic, licenseId, hardwareId, ephemeralPrivate);

const payload: LicenseFilePayload = {
  ...bound.payload,
  version: 2,
  machine_key: encodeMachineKey(machinePublic),
  encrypted_key: encryptedKey,
};
const seed = Buffer.from(v1.signing_secret_key_hex, 'hex');
const signingKey = createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' });
const canonical = canonicalPayloadText(payload);
const signature = sign(null, Buffer.from(canonical, 'utf8'), signingKey);
const file = encodeLicenseFile(payload, signature);

const out = {
  description: 'A .lic file of format version 2 in the machine-key form (docs/offline-license-format.md, "The machine-key binding"): the payload of bound-with-key (offline-license-v1.json) with version 2, machine_key, and the same decryption key sealed to the machine key with HPKE (RFC 9180 base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM), signed with the key of RFC 8032 section 7.1 TEST 1. The machine and ephemeral private keys are those of RFC 7748 section 6.1 (Alice, Bob).',
  machine_private_key_hex: hex(machinePrivate),
  machine_public_key_hex: hex(machinePublic),
  machine_key: payload.machine_key,
  ephemeral_private_key_hex: hex(ephemeralPrivate),
  decryption_key_hex: hex(decryptionKey),
  info_text: new TextDecoder().decode(info),
  info_hex: hex(info),
  aad_hex: '',
  enc_hex: hex(enc),
  shared_secret_hex: hex(sharedSecret),
  key_schedule_context_hex: hex(schedule.keyScheduleContext),
  secret_hex: hex(schedule.secret),
  key_hex: hex(schedule.key),
  base_nonce_hex: hex(schedule.baseNonce),
  encrypted_key: encryptedKey,
  encrypted_key_hex: hex(Buffer.from(encryptedKey, 'base64')),
  payload,
  canonical_payload: canonical,
  signature: signature.toString('base64'),
  file,
};
writeFileSync(new URL('../test/vectors/offline-license-v2-machine-key.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
writeFileSync(new URL('../test/vectors/machine-key.lic', import.meta.url), file);
console.log(out);
