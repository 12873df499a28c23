// Writes test/vectors/activation-request-v1.json (the activation request file) and
// test/vectors/offline-license-v2.json (.lic version 2 with request_nonce), as pinned in
// docs/offline-license-format.md sections 12 and 13: `node --import tsx scripts/make-request-vectors.ts`.
// Every input is fixed (keys from RFC 7748 and RFC 8032, nonce bytes counting up), so the
// output is too. test/lib/offline/request-vectors.test.ts and
// clients/go/offline/request_vectors_test.go hold the two implementations to it.
import { readFileSync, writeFileSync } from 'node:fs';
import { x25519 } from '@noble/curves/ed25519.js';
import canonicalize from 'canonicalize';
import {
  ACTIVATION_REQUEST_BEGIN,
  ACTIVATION_REQUEST_END,
  encodeActivationRequest,
  LICENSE_KEY_DIGEST_CONTEXT,
  licenseKeyDigest,
  type ActivationRequest,
} from '../src/lib/offline/activation-request.js';
import { signEd25519 } from '../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, encodeLicenseFile, type LicenseFilePayload } from '../src/lib/offline/format.js';
import { sealForMachine } from '../src/lib/offline/machine-key.js';
import { SMALL_ORDER_POINTS } from '../src/lib/crypto/x25519-small-order.js';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const lic = JSON.parse(readFileSync(new URL('../test/vectors/offline-license-v1.json', import.meta.url), 'utf8'));
const secretKey = Buffer.from(lic.signing_secret_key_hex, 'hex');
const bound = lic.vectors.find((vector: { name: string }) => vector.name === 'bound-with-key');

// RFC 7748 section 6.1: Alice's private key, whose public key anyone can look up.
const machinePrivate = Buffer.from('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a', 'hex');
const machinePublic = x25519.getPublicKey(machinePrivate);
const nonce = Buffer.from('000102030405060708090a0b0c0d0e0f', 'hex');
const licenseKey = '7KQ2-M9XD-1RTV-4HJP-8WNC-3FGB-6ZSY';
const typed = ' 7kq2 m9xd 1rtv 4hjp 8wnc 3fgb 6zsy\n';

const request: ActivationRequest = {
  format: 'license-server-activation-request',
  version: 1,
  license_key_prefix: licenseKey.slice(0, 8),
  license_key_digest: licenseKeyDigest(licenseKey),
  hardware_id: bound.binding.hardware_id,
  machine_name: 'Prüfstand 3 — Halle B',
  app_version: '4.2.0',
  machine_key: Buffer.from(machinePublic).toString('base64url'),
  nonce: nonce.toString('base64url'),
  created_at: '2026-11-22T09:30:00Z',
};
if (licenseKeyDigest(typed) !== request.license_key_digest) throw new Error('a key typed in lower case with spaces must give the same digest');
const text = encodeActivationRequest(request);
const json = canonicalize(request)!;
// Six "~" hold a 3-byte group at every alignment, whose Base64 is "fn5+": base64url differs there.
const tildes = canonicalize({ ...request, machine_name: 'bench ~~~~~~' })!;
if (!/[+/]/.test(Buffer.from(tildes, 'utf8').toString('base64'))) throw new Error('the base64url vector needs a + or / in the Base64');
const withPrevious: ActivationRequest = { ...request, previous_hardware_id: 'hw1-0123456789abcdef0123456789abcdef' };

/** A request text whose JSON is `object` written as given (not necessarily canonical). */
function armoured(jsonText: string, width = 64): string {
  const base64 = Buffer.from(jsonText, 'utf8').toString('base64');
  return `${ACTIVATION_REQUEST_BEGIN}\n${base64.match(new RegExp(`.{1,${width}}`, 'g'))!.join('\n')}\n${ACTIVATION_REQUEST_END}\n`;
}
const changed = (members: Record<string, unknown>, without: string[] = []) => {
  const object: Record<string, unknown> = { ...request, ...members };
  for (const name of without) delete object[name];
  return armoured(canonicalize(object)!);
};
const malformed = (reason: string) => `activation request is malformed: ${reason}`;

// The X25519 points of small order (section 12), each as a machine_key, and two with the top
// bit of the last byte set (the same points to X25519). Each names its bytes for readers that
// check, with their own X25519, that every one gives an all-zero shared secret.
const smallOrder = (name: string, hex: string) => ({
  name: `machine-key-small-order-${name}`,
  machine_key_hex: hex,
  text: changed({ machine_key: Buffer.from(hex, 'hex').toString('base64url') }),
  message: malformed('"machine_key" is an X25519 point of small order (section 12 lists them), not the public key of a key pair'),
});
const withTopBit = (hex: string) => `${hex.slice(0, 62)}${(Number.parseInt(hex.slice(62), 16) | 0x80).toString(16)}`;
const SMALL_ORDER_NAMES = ['zero', 'one', 'order-8-a', 'order-8-b', 'p-minus-1', 'p', 'p-plus-1'];
if (SMALL_ORDER_NAMES.length !== SMALL_ORDER_POINTS.length) throw new Error('a name for each point of small order');
const smallOrderVectors = [
  ...SMALL_ORDER_POINTS.map((hex, i) => smallOrder(SMALL_ORDER_NAMES[i]!, hex)),
  smallOrder('zero-top-bit', withTopBit(SMALL_ORDER_POINTS[0]!)),
  smallOrder('order-8-a-top-bit', withTopBit(SMALL_ORDER_POINTS[2]!)),
];

const requestVectors = {
  description: 'Activation request files (docs/offline-license-format.md section 12). "request" is the valid request, "text" its file; "accept" are other texts of valid requests with what they decode to; "refuse" are texts every reader refuses with ACTIVATION_REQUEST_MALFORMED and the message given.',
  license_key: licenseKey,
  license_key_as_typed: typed,
  license_key_digest_input: LICENSE_KEY_DIGEST_CONTEXT + licenseKey,
  license_key_digest: request.license_key_digest,
  machine_private_key_hex: hex(machinePrivate),
  machine_public_key_hex: hex(machinePublic),
  nonce_hex: hex(nonce),
  request,
  canonical_json: json,
  text,
  accept: [
    { name: 'with-previous-hardware-id', request: withPrevious, text: encodeActivationRequest(withPrevious) },
    { name: 'crlf-and-rewrapped', description: 'the text with CRLF line ends, wrapped at 76 columns, indented, with blank lines around', request, text: `\r\n  ${armoured(json, 76).replace(/\n/g, '\r\n  ')}\r\n` },
  ],
  refuse: [
    { name: 'empty', text: '', message: malformed('it is empty') },
    { name: 'no-begin-line', text: text.replace(`${ACTIVATION_REQUEST_BEGIN}\n`, ''), message: malformed(`it does not start with the line ${ACTIVATION_REQUEST_BEGIN}`) },
    { name: 'truncated', text: text.slice(0, 200), message: malformed(`it does not end with the line ${ACTIVATION_REQUEST_END} (it may be truncated)`) },
    { name: 'text-after-end', text: `${text}-- \nsent from my phone\n`, message: malformed(`it does not end with the line ${ACTIVATION_REQUEST_END} (it may be truncated)`) },
    { name: 'base64url-body', description: 'a valid request (machine name "bench ~~~~~~") in base64url without padding', text: armoured(tildes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=/g, ''), message: malformed('the text between its BEGIN and END lines is not standard Base64') },
    { name: 'non-canonical-base64', text: nonCanonicalBase64(json), message: malformed('the Base64 is not the canonical encoding of its bytes') },
    { name: 'not-json', text: armoured('format=license-server-activation-request'), message: malformed('the decoded content is not JSON') },
    { name: 'not-canonical-json', text: armoured(JSON.stringify(request, null, 1)), message: malformed('its JSON is not in RFC 8785 canonical form (members sorted, no spaces, each member once)') },
    { name: 'member-twice', text: armoured(json.replace('{', `{"app_version":"9.9.9",`)), message: malformed('its JSON is not in RFC 8785 canonical form (members sorted, no spaces, each member once)') },
    { name: 'unknown-member', text: changed({ license_key: licenseKey }), message: malformed('the member "license_key" is not part of an activation request') },
    { name: 'missing-nonce', text: changed({}, ['nonce']), message: malformed('the member "nonce" is missing') },
    { name: 'wrong-format', text: changed({ format: 'license-server-license' }), message: malformed('"format" must be "license-server-activation-request"') },
    { name: 'version-2', text: changed({ version: 2 }), message: malformed('it has version 2; this license-server reads version 1') },
    { name: 'nonce-15-bytes', text: changed({ nonce: nonce.subarray(0, 15).toString('base64url') }), message: malformed('"nonce" must be the unpadded base64url of 16 bytes (22 characters)') },
    { name: 'nonce-padded', text: changed({ nonce: `${nonce.toString('base64url')}==` }), message: malformed('"nonce" must be the unpadded base64url of 16 bytes (22 characters)') },
    { name: 'nonce-non-canonical', text: changed({ nonce: `${nonce.toString('base64url').slice(0, 21)}x` }), message: malformed('"nonce" must be the unpadded base64url of 16 bytes (22 characters)') },
    { name: 'machine-key-standard-base64', text: changed({ machine_key: Buffer.from('fbff'.repeat(16), 'hex').toString('base64').replace(/=+$/, '') }), message: malformed('"machine_key" must be the unpadded base64url of 32 bytes (43 characters)') },
    ...smallOrderVectors,
    { name: 'digest-hex', text: changed({ license_key_digest: 'ab'.repeat(32) }), message: malformed('"license_key_digest" must be the unpadded base64url of 32 bytes (43 characters)') },
    { name: 'prefix-7', text: changed({ license_key_prefix: '7KQ2-M9' }), message: malformed('"license_key_prefix" must be 8 UTF-16 code units') },
    { name: 'hardware-id-empty', text: changed({ hardware_id: '' }), message: malformed('"hardware_id": must not be empty') },
    { name: 'hardware-id-not-nfc', text: changed({ hardware_id: 'HW-4f2a-9c1e-u\u0308' }), message: malformed('"hardware_id" must be in Unicode NFC') },
    { name: 'previous-hardware-id-same', text: changed({ previous_hardware_id: request.hardware_id }), message: malformed('"previous_hardware_id" must not equal "hardware_id"') },
    { name: 'machine-name-control', text: changed({ machine_name: 'bench\t3' }), message: malformed('"machine_name" must be a string of at most 255 UTF-16 code units without control characters') },
    { name: 'app-version-101', text: changed({ app_version: '1'.repeat(101) }), message: malformed('"app_version" must be a string of at most 100 UTF-16 code units without control characters') },
    { name: 'created-at-fraction', text: changed({ created_at: '2026-11-22T09:30:00.000Z' }), message: malformed('"created_at" must be an RFC 3339 UTC timestamp with second precision, such as 2026-11-22T10:00:00Z') },
    { name: 'created-at-february-30', text: changed({ created_at: '2026-02-30T09:30:00Z' }), message: malformed('"created_at" must be an RFC 3339 UTC timestamp with second precision, such as 2026-11-22T10:00:00Z') },
  ],
};

/** The request's Base64 with the unused low bits of its last symbol set: same bytes, another text. */
function nonCanonicalBase64(jsonText: string): string {
  const base64 = Buffer.from(jsonText, 'utf8').toString('base64');
  if (!base64.endsWith('=')) throw new Error('the vector needs padding');
  const at = base64.indexOf('=') - 1;
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const altered = `${base64.slice(0, at)}${alphabet[alphabet.indexOf(base64[at]!) + 1]}${base64.slice(at + 1)}`;
  return `${ACTIVATION_REQUEST_BEGIN}\n${altered.match(/.{1,64}/g)!.join('\n')}\n${ACTIVATION_REQUEST_END}\n`;
}

// .lic version 2: bound-with-key's payload, answering the request above.
const v2Payload = { ...(bound.payload as LicenseFilePayload), version: 2, request_nonce: request.nonce } as LicenseFilePayload;
const v2Canonical = canonicalPayloadBytes(v2Payload);
const v2Signature = signEd25519(v2Canonical, secretKey);
const v2File = encodeLicenseFile(v2Payload, v2Signature);
const signedFile = (payload: Record<string, unknown>) => encodeLicenseFile(payload as unknown as LicenseFilePayload, signEd25519(canonicalPayloadBytes(payload as unknown as LicenseFilePayload), secretKey));
const { request_nonce: _nonce, ...v2WithoutNonce } = v2Payload;
// Both version 2 members (sections 13 and 14): the answer to the request of a machine-key
// license, its decryption key sealed to the request's machine key. The ephemeral key is
// Bob's of RFC 7748 section 6.1, as in offline-license-v2-machine-key.json.
const ephemeralPrivate = Buffer.from('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb', 'hex');
const bothPayload = {
  ...v2Payload,
  machine_key: request.machine_key,
  encrypted_key: sealForMachine(Buffer.from(bound.binding.decryption_key_hex, 'hex'), machinePublic, bound.payload.license_id, bound.payload.hardware_id, ephemeralPrivate),
} as LicenseFilePayload;
const bothCanonical = canonicalPayloadBytes(bothPayload);
const bothSignature = signEd25519(bothCanonical, secretKey);
const bothFile = encodeLicenseFile(bothPayload, bothSignature);
const fileMalformed = (reason: string) => `license file is malformed: ${reason}`;
const withoutKey = ({ encrypted_key: _key, ...rest }: LicenseFilePayload) => rest;

const v2Vectors = {
  description: '.lic format version 2 (docs/offline-license-format.md sections 13 and 14): "vectors" verify with signing-key.pem at "now" and "hardware_id", unseal "decryption_key_hex" (with "machine_private_key_hex" where the file has machine_key; without it a reader refuses to open the key) and answer the request of activation-request-v1.json; "lic_file" is the same file in test/vectors; "refuse" are files every reader of version 2 refuses with "code" and "message".',
  public_key_pem: lic.public_key_pem,
  now: '2026-11-22T12:00:00Z',
  vectors: [
    {
      name: 'request-nonce',
      payload: v2Payload,
      canonical_payload_hex: hex(v2Canonical),
      signature: Buffer.from(v2Signature).toString('base64'),
      file: v2File,
      hardware_id: bound.binding.hardware_id,
      decryption_key_hex: bound.binding.decryption_key_hex,
      request_nonce: request.nonce,
      lic_file: 'request-nonce.lic',
    },
    {
      name: 'request-nonce-and-machine-key',
      payload: bothPayload,
      canonical_payload_hex: hex(bothCanonical),
      signature: Buffer.from(bothSignature).toString('base64'),
      file: bothFile,
      hardware_id: bound.binding.hardware_id,
      decryption_key_hex: bound.binding.decryption_key_hex,
      request_nonce: request.nonce,
      machine_private_key_hex: hex(machinePrivate),
      ephemeral_private_key_hex: hex(ephemeralPrivate),
      lic_file: 'request-nonce-machine-key.lic',
    },
  ],
  refuse: [
    { name: 'version-2-without-v2-members', file: signedFile(v2WithoutNonce), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('a version 2 file must carry "request_nonce" or "machine_key"; without, it is written as version 1') },
    { name: 'version-1-with-request-nonce', file: signedFile({ ...v2Payload, version: 1 }), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('the field "request_nonce" is not part of format version 1') },
    { name: 'request-nonce-21-characters', file: signedFile({ ...v2Payload, request_nonce: request.nonce.slice(0, 21) }), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('"request_nonce" must be the unpadded base64url of 16 bytes (22 characters)') },
    { name: 'request-nonce-non-canonical', file: signedFile({ ...v2Payload, request_nonce: `${request.nonce.slice(0, 21)}x` }), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('"request_nonce" must be the unpadded base64url of 16 bytes (22 characters)') },
    { name: 'request-nonce-padded', file: signedFile({ ...v2Payload, request_nonce: `${request.nonce}==` }), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('"request_nonce" must be the unpadded base64url of 16 bytes (22 characters)') },
    { name: 'request-nonce-not-a-string', file: signedFile({ ...v2Payload, request_nonce: 16 }), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('"request_nonce" must be the unpadded base64url of 16 bytes (22 characters)') },
    // With machine_key too (section 14): the key must be the HPKE form, and the file bound.
    { name: 'request-nonce-and-machine-key-with-60-byte-key', file: signedFile({ ...v2Payload, machine_key: request.machine_key }), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('"encrypted_key" must be the Base64 of 80 bytes') },
    { name: 'request-nonce-and-machine-key-unbound', file: signedFile({ ...withoutKey(v2Payload), machine_key: request.machine_key, hardware_id: '' }), code: 'LICENSE_FILE_MALFORMED', message: fileMalformed('"machine_key" requires a "hardware_id"') },
    { name: 'version-3', file: signedFile({ ...v2Payload, version: 3 }), code: 'LICENSE_FILE_UNSUPPORTED_VERSION', message: 'license file has format version 3; this license-server reads versions 1 and 2' },
  ],
};

writeFileSync(new URL('../test/vectors/activation-request-v1.json', import.meta.url), `${JSON.stringify(requestVectors, null, 2)}\n`);
writeFileSync(new URL('../test/vectors/offline-license-v2.json', import.meta.url), `${JSON.stringify(v2Vectors, null, 2)}\n`);
writeFileSync(new URL('../test/vectors/request-nonce.lic', import.meta.url), v2File);
writeFileSync(new URL('../test/vectors/request-nonce-machine-key.lic', import.meta.url), bothFile);
writeFileSync(new URL('../test/vectors/activation-request.txt', import.meta.url), text);
console.log('wrote test/vectors/activation-request-v1.json, offline-license-v2.json, request-nonce.lic, request-nonce-machine-key.lic and activation-request.txt');
