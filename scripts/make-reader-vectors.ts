// Writes test/vectors/offline-license-v1-readers.json: `.lic` files that this server's writer
// does not make but that a reader meets, with what every reader must do with them
// (docs/offline-license-format.md sections 3 and 7): `node --import tsx scripts/make-reader-vectors.ts`.
// Signatures are deterministic (Ed25519) and the nonce is fixed, so the output is too.
// test/lib/offline/reader-vectors.test.ts and clients/go/offline/reader_vectors_test.go
// hold the two readers to it.
import { readFileSync, writeFileSync } from 'node:fs';
import { sealDecryptionKey } from '../src/lib/offline/binding.js';
import { signEd25519 } from '../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, encodeLicenseFile, type LicenseFilePayload } from '../src/lib/offline/format.js';

const lic = JSON.parse(readFileSync(new URL('../test/vectors/offline-license-v1.json', import.meta.url), 'utf8'));
const secretKey = Buffer.from(lic.signing_secret_key_hex, 'hex');
const bound = lic.vectors.find((vector: { name: string }) => vector.name === 'bound-with-key');
const unbound = lic.vectors.find((vector: { name: string }) => vector.name === 'unbound');
const decryptionKeyHex: string = bound.binding.decryption_key_hex;
const nonce = Buffer.from(bound.binding.nonce_hex, 'hex');
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

/** The canonical JSON text of a vector's file, with replacements made in it (each must apply once). */
function edited(file: string, replacements: Array<[string, string]>): string {
  let text = Buffer.from(file, 'base64').toString('utf8');
  for (const [from, to] of replacements) {
    if (text.split(from).length !== 2) throw new Error(`${from} does not occur exactly once`);
    text = text.replace(from, to);
  }
  return `${Buffer.from(text, 'utf8').toString('base64')}\n`;
}

/** A payload signed with the TEST 1 key and written as this server writes files. */
function signed(payload: LicenseFilePayload): { file: string; payload: LicenseFilePayload; canonical_payload_hex: string } {
  const canonical = canonicalPayloadBytes(payload);
  return { file: encodeLicenseFile(payload, signEd25519(canonical, secretKey)), payload, canonical_payload_hex: hex(canonical) };
}

function boundTo(hardwareId: string, withKey: boolean): LicenseFilePayload {
  const { encrypted_key: _sealed, ...rest } = bound.payload as LicenseFilePayload;
  return {
    ...rest,
    hardware_id: hardwareId,
    ...(withKey ? { encrypted_key: sealDecryptionKey(Buffer.from(decryptionKeyHex, 'hex'), hardwareId, rest.license_id, nonce) } : {}),
  } as LicenseFilePayload;
}

const decomposed = 'HW-4f2a-9c1e-u\u0308';
const long = '\u00fc'.repeat(256);
const bell = 'HW-\u0007-bell';

const accept = [
  {
    name: 'integers-with-fraction-and-exponent',
    description: 'bound-with-key with "version":1.0 and "usage_limit":2.5E1: the values 1 and 25, so the canonical form and the signature are bound-with-key\'s',
    file: edited(bound.file, [['"version":1}', '"version":1.0}'], ['"usage_limit":25}', '"usage_limit":2.5E1}']]),
    hardware_id: bound.binding.hardware_id,
    payload: bound.payload,
    canonical_payload_hex: bound.canonical_payload_hex,
    decryption_key_hex: decryptionKeyHex,
  },
  {
    name: 'number-read-as-binary64',
    description: 'bound-with-key with "usage_limit":25.000000000000001, which as an IEEE 754 double (RFC 8785 section 3.2.2.3) is 25',
    file: edited(bound.file, [['"usage_limit":25}', '"usage_limit":25.000000000000001}']]),
    hardware_id: bound.binding.hardware_id,
    payload: bound.payload,
    canonical_payload_hex: bound.canonical_payload_hex,
    decryption_key_hex: decryptionKeyHex,
  },
  {
    name: 'hardware-id-not-nfc',
    description: 'bound to a hardware ID in decomposed form (u U+0308) with the key sealed to it, as a server that did not normalise wrote it; the NFC form names the same machine',
    ...signed(boundTo(decomposed, true)),
    hardware_id: decomposed,
    nfc_hardware_id: decomposed.normalize('NFC'),
    decryption_key_hex: decryptionKeyHex,
  },
  {
    name: 'hardware-id-256-code-units',
    description: 'bound to 256 times U+00FC: 256 UTF-16 code units, 512 bytes of UTF-8 (the limit of a server that counted code units)',
    ...signed(boundTo(long, true)),
    hardware_id: long,
    decryption_key_hex: decryptionKeyHex,
  },
  {
    name: 'hardware-id-control-character',
    description: 'bound (without a key) to a hardware ID holding U+0007, which no server writes; readers check the form of hardware_id, not the server\'s input rules',
    ...signed(boundTo(bell, false)),
    hardware_id: bell,
  },
  {
    name: 'utf-8-byte-order-mark',
    description: 'bound-with-key with the UTF-8 byte order mark EF BB BF before its JSON: dropped (section 2 rule 4), so the canonical form and the signature are bound-with-key\'s',
    file: `${Buffer.concat([Buffer.of(0xef, 0xbb, 0xbf), Buffer.from(bound.file, 'base64')]).toString('base64')}\n`,
    hardware_id: bound.binding.hardware_id,
    payload: bound.payload,
    canonical_payload_hex: bound.canonical_payload_hex,
    decryption_key_hex: decryptionKeyHex,
  },
  {
    name: 'utf-16-code-unit-limits',
    description: 'bound (without a key), with "license_key_prefix" "7KQ2-" U+1F680 "X" (8 UTF-16 code units, 7 code points) and a "customer_name" of 500 times U+1F680 (1000 UTF-16 code units, 2000 bytes of UTF-8): both at their limits, counted in UTF-16 code units',
    ...signed({ ...boundTo('HW-1', false), license_key_prefix: '7KQ2-\u{1F680}X', customer_name: '\u{1F680}'.repeat(500) }),
    hardware_id: 'HW-1',
  },
];

const refuse = [
  {
    name: 'usage-limit-fraction',
    description: 'bound-with-key with "usage_limit":25.5',
    file: edited(bound.file, [['"usage_limit":25}', '"usage_limit":25.5}']]),
    code: 'LICENSE_FILE_MALFORMED',
    message: 'license file is malformed: entitlement "usage_limit" must be a non-negative integer or null',
  },
  {
    name: 'usage-limit-above-2^53-1',
    description: 'bound-with-key with "usage_limit":9007199254740992',
    file: edited(bound.file, [['"usage_limit":25}', '"usage_limit":9007199254740992}']]),
    code: 'LICENSE_FILE_MALFORMED',
    message: 'license file is malformed: entitlement "usage_limit" must be a non-negative integer or null',
  },
  {
    name: 'version-fraction',
    description: 'unbound with "version":1.5',
    file: edited(unbound.file, [['"version":1}', '"version":1.5}']]),
    code: 'LICENSE_FILE_MALFORMED',
    message: 'license file is malformed: the field "version" is missing or not an integer',
  },
  {
    name: 'version-3.0',
    description: 'unbound with "version":3.0, the integer 3 (version 2 is read: offline-license-v2.json, offline-license-v2-machine-key.json)',
    file: edited(unbound.file, [['"version":1}', '"version":3.0}']]),
    code: 'LICENSE_FILE_UNSUPPORTED_VERSION',
    message: 'license file has format version 3; this license-server reads versions 1 and 2',
  },
  {
    name: 'hardware-id-257-code-units',
    description: 'signed, bound (without a key) to 257 times "x"',
    file: signed(boundTo('x'.repeat(257), false)).file,
    code: 'LICENSE_FILE_MALFORMED',
    message: 'license file is malformed: "hardware_id" must be a string of at most 256 UTF-16 code units',
  },
  {
    name: 'license-key-prefix-9-code-units',
    description: 'signed, bound (without a key), with "license_key_prefix" "7KQ2-M9" and U+1F680: 8 code points but 9 UTF-16 code units',
    file: signed({ ...boundTo('HW-1', false), license_key_prefix: '7KQ2-M9\u{1F680}' }).file,
    code: 'LICENSE_FILE_MALFORMED',
    message: 'license file is malformed: "license_key_prefix" must be 8 UTF-16 code units',
  },
  {
    name: 'customer-name-1001-code-units',
    description: 'signed, bound (without a key), with a "customer_name" of 500 times U+1F680 and "x": 501 code points but 1001 UTF-16 code units',
    file: signed({ ...boundTo('HW-1', false), customer_name: `${'\u{1F680}'.repeat(500)}x` }).file,
    code: 'LICENSE_FILE_MALFORMED',
    message: 'license file is malformed: "customer_name" must be a string of at most 1000 UTF-16 code units',
  },
];

const out = {
  description: 'Files a .lic reader meets that this server does not write, and what every reader does with them (docs/offline-license-format.md sections 3 and 7). Verify with signing-key.pem at "now"; an accepted file verifies with "hardware_id" (and, in a reader that normalises, with "nfc_hardware_id"), decodes to "payload" and has the signed bytes "canonical_payload_hex".',
  public_key_pem: lic.public_key_pem,
  now: '2026-11-22T12:00:00Z',
  accept,
  refuse,
};
writeFileSync(new URL('../test/vectors/offline-license-v1-readers.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
console.log('wrote test/vectors/offline-license-v1-readers.json');
