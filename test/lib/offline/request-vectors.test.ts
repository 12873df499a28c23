import assert from 'node:assert/strict';
import { createHash, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { x25519 } from '@noble/curves/ed25519.js';
import canonicalize from 'canonicalize';
import { isSmallOrderPoint, SMALL_ORDER_POINTS } from '../../../src/lib/crypto/x25519-small-order.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import {
  decodeActivationRequest,
  encodeActivationRequest,
  licenseKeyDigest,
  type ActivationRequest,
} from '../../../src/lib/offline/activation-request.js';
import { canonicalPayloadBytes, decodeLicenseFile, encodeLicenseFile, type LicenseFilePayload } from '../../../src/lib/offline/format.js';
import { signEd25519 } from '../../../src/lib/offline/ed25519.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';

const vectorsUrl = new URL('../../vectors/', import.meta.url);
const requests = JSON.parse(readFileSync(new URL('activation-request-v1.json', vectorsUrl), 'utf8')) as {
  license_key: string;
  license_key_as_typed: string;
  license_key_digest_input: string;
  license_key_digest: string;
  machine_private_key_hex: string;
  machine_public_key_hex: string;
  nonce_hex: string;
  request: ActivationRequest;
  canonical_json: string;
  text: string;
  accept: Array<{ name: string; request: ActivationRequest; text: string }>;
  refuse: Array<{ name: string; text: string; message: string; machine_key_hex?: string }>;
};
const v2 = JSON.parse(readFileSync(new URL('offline-license-v2.json', vectorsUrl), 'utf8')) as {
  public_key_pem: string;
  now: string;
  vectors: Array<{ name: string; payload: LicenseFilePayload; canonical_payload_hex: string; signature: string; file: string; hardware_id: string; decryption_key_hex: string; request_nonce: string; lic_file: string; machine_private_key_hex?: string }>;
  refuse: Array<{ name: string; file: string; code: string; message: string }>;
};
const v1 = JSON.parse(readFileSync(new URL('offline-license-v1.json', vectorsUrl), 'utf8')) as { signing_secret_key_hex: string };

function refusedWith(code: string, message?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, code);
    if (message !== undefined) assert.equal(error.message, message);
    return true;
  };
}

describe('activation request vectors (test/vectors/activation-request-v1.json)', () => {
  it('the digest is SHA-256 of the context line and the canonical key, unpadded base64url; a key typed otherwise gives the same', () => {
    const independent = createHash('sha256').update(Buffer.from(requests.license_key_digest_input, 'utf8')).digest('base64').replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
    assert.equal(requests.license_key_digest, independent);
    assert.equal(requests.license_key_digest_input, `license-server/v1/activation-request\n${requests.license_key}`);
    assert.equal(licenseKeyDigest(requests.license_key), requests.license_key_digest);
    assert.equal(licenseKeyDigest(requests.license_key_as_typed), requests.license_key_digest);
  });

  it('the machine key is the X25519 public key of the private key given (RFC 7748 section 6.1), and the nonce its bytes', () => {
    assert.equal(Buffer.from(x25519.getPublicKey(Buffer.from(requests.machine_private_key_hex, 'hex'))).toString('hex'), requests.machine_public_key_hex);
    assert.equal(requests.machine_public_key_hex, '8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a');
    assert.equal(Buffer.from(requests.request.machine_key, 'base64url').toString('hex'), requests.machine_public_key_hex);
    assert.equal(Buffer.from(requests.request.nonce, 'base64url').toString('hex'), requests.nonce_hex);
  });

  it('the text is the armour around the Base64 of the canonical JSON, 64 columns a line; the writer makes it byte for byte', () => {
    assert.equal(canonicalize(requests.request), requests.canonical_json);
    const lines = requests.text.split('\n');
    assert.equal(lines[0], '-----BEGIN LICENSE ACTIVATION REQUEST-----');
    assert.deepEqual(lines.slice(-2), ['-----END LICENSE ACTIVATION REQUEST-----', '']);
    const body = lines.slice(1, -2);
    assert.ok(body.slice(0, -1).every((line) => line.length === 64) && body.at(-1)!.length <= 64);
    assert.equal(Buffer.from(body.join(''), 'base64').toString('utf8'), requests.canonical_json);
    assert.equal(encodeActivationRequest(requests.request), requests.text);
    assert.equal(readFileSync(new URL('activation-request.txt', vectorsUrl), 'utf8'), requests.text);
    assert.deepEqual(decodeActivationRequest(requests.text), requests.request);
    assert.deepEqual(decodeActivationRequest(Buffer.from(requests.text)), requests.request);
  });

  for (const vector of requests.accept) {
    it(`accepts ${vector.name}`, () => {
      assert.deepEqual(decodeActivationRequest(vector.text), vector.request);
    });
  }

  it('the machine keys of small order are what X25519 (noble) says: an all-zero shared secret with any private key; every point of the list and two with the top bit set', () => {
    const smallOrder = requests.refuse.filter((vector) => vector.machine_key_hex !== undefined);
    const masked = (hex: string) => `${hex.slice(0, 62)}${(Number.parseInt(hex.slice(62), 16) & 0x7f).toString(16).padStart(2, '0')}`;
    assert.deepEqual([...new Set(smallOrder.map((vector) => masked(vector.machine_key_hex!)))].sort(), [...SMALL_ORDER_POINTS].sort());
    assert.equal(smallOrder.length, SMALL_ORDER_POINTS.length + 2);
    const zeroWith = (publicKey: Uint8Array) => {
      try {
        return x25519.getSharedSecret(x25519.utils.randomSecretKey(), publicKey).every((byte) => byte === 0);
      } catch {
        return true; // noble refuses an all-zero result itself
      }
    };
    for (const vector of smallOrder) {
      const key = Buffer.from(vector.machine_key_hex!, 'hex');
      const body = vector.text.split('\n').slice(1, -2).join('');
      assert.equal(JSON.parse(Buffer.from(body, 'base64').toString('utf8')).machine_key, key.toString('base64url'), vector.name);
      for (let i = 0; i < 3; i += 1) assert.ok(zeroWith(key), `${vector.name}: all zeros`);
    }
    // And keys of real key pairs are not on the list, whatever their top bit.
    for (let i = 0; i < 200; i += 1) {
      const key = x25519.getPublicKey(x25519.utils.randomSecretKey());
      assert.equal(isSmallOrderPoint(key), false);
      key[31] = key[31]! | 0x80;
      assert.equal(isSmallOrderPoint(key), false);
    }
  });

  for (const vector of requests.refuse) {
    it(`refuses ${vector.name}: ${vector.message}`, () => {
      assert.throws(() => decodeActivationRequest(vector.text), refusedWith('ACTIVATION_REQUEST_MALFORMED', vector.message));
    });
  }
});

describe('.lic version 2 vectors (test/vectors/offline-license-v2.json)', () => {
  const now = new Date(v2.now);

  for (const vector of v2.vectors) {
    it(`${vector.name}: verifies, unseals, answers the request's nonce; the writer makes it byte for byte`, () => {
      const machine = vector.machine_private_key_hex === undefined ? {} : { machinePrivateKey: new Uint8Array(Buffer.from(vector.machine_private_key_hex, 'hex')) };
      const verified = verifyLicenseFile(vector.file, { publicKey: v2.public_key_pem, hardwareId: vector.hardware_id, now, ...machine });
      assert.deepEqual(verified.payload, vector.payload);
      if (vector.machine_private_key_hex !== undefined) {
        // The file alone does not open a machine-key file's decryption key (section 14).
        assert.equal(verified.payload.machine_key, requests.request.machine_key);
        assert.throws(() => verifyLicenseFile(vector.file, { publicKey: v2.public_key_pem, hardwareId: vector.hardware_id, now }), refusedWith('MACHINE_KEY_MISSING'));
      }
      assert.equal(verified.payload.request_nonce, requests.request.nonce);
      assert.equal(Buffer.from(verified.decryptionKey!).toString('hex'), vector.decryption_key_hex);
      const canonical = canonicalPayloadBytes(vector.payload);
      assert.equal(Buffer.from(canonical).toString('hex'), vector.canonical_payload_hex);
      assert.equal(Buffer.from(canonical).toString('utf8'), canonicalize(vector.payload));
      // Independently of our signer: node:crypto checks the signature over the canonical bytes.
      assert.ok(nodeVerify(null, canonical, createPublicKey(v2.public_key_pem), Buffer.from(vector.signature, 'base64')));
      const signature = signEd25519(canonical, Buffer.from(v1.signing_secret_key_hex, 'hex'));
      assert.equal(encodeLicenseFile(vector.payload, signature), vector.file);
      assert.equal(readFileSync(new URL(vector.lic_file, vectorsUrl), 'utf8'), vector.file);
      assert.deepEqual(decodeLicenseFile(vector.file).payload, vector.payload);
    });
  }

  for (const vector of v2.refuse) {
    it(`refuses ${vector.name}: ${vector.code}`, () => {
      assert.throws(() => verifyLicenseFile(vector.file, { publicKey: v2.public_key_pem, skipHardwareCheck: true, now }), refusedWith(vector.code, vector.message));
    });
  }
});
