import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { decodeLicenseFile, type LicenseFilePayload } from '../../../src/lib/offline/format.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';

interface Accepted {
  name: string;
  file: string;
  hardware_id: string;
  nfc_hardware_id?: string;
  payload: LicenseFilePayload;
  canonical_payload_hex: string;
  decryption_key_hex?: string;
}

interface Refused {
  name: string;
  file: string;
  code: string;
  message: string;
}

const vectorsUrl = new URL('../../vectors/', import.meta.url);
const data = JSON.parse(readFileSync(new URL('offline-license-v1-readers.json', vectorsUrl), 'utf8')) as {
  public_key_pem: string;
  now: string;
  accept: Accepted[];
  refuse: Refused[];
};
const now = new Date(data.now);
const publicKey = data.public_key_pem;
const byName = (name: string) => data.accept.find((vector) => vector.name === name)!;
const jsonOf = (file: string) => Buffer.from(file, 'base64').toString('utf8');
const decodeLicenseFileText = (file: string) => JSON.parse(jsonOf(file)) as { license_key_prefix: string; customer_name: string };

describe('.lic reader vectors (test/vectors/offline-license-v1-readers.json)', () => {
  it('are signed with the key of signing-key.pem', () => {
    assert.equal(readFileSync(new URL('signing-key.pem', vectorsUrl), 'utf8'), publicKey);
  });

  it('hold what their names say', () => {
    assert.match(jsonOf(byName('integers-with-fraction-and-exponent').file), /"usage_limit":2\.5E1\}.*"version":1\.0\}$/);
    assert.match(jsonOf(byName('number-read-as-binary64').file), /"usage_limit":25\.000000000000001\}/);
    const notNfc = byName('hardware-id-not-nfc');
    assert.notEqual(notNfc.hardware_id, notNfc.hardware_id.normalize('NFC'));
    assert.equal(notNfc.nfc_hardware_id, notNfc.hardware_id.normalize('NFC'));
    const long = byName('hardware-id-256-code-units').hardware_id;
    assert.deepEqual([long.length, Buffer.byteLength(long)], [256, 512]);
    assert.match(byName('hardware-id-control-character').hardware_id, /\u0007/);
    assert.deepEqual([...Buffer.from(byName('utf-8-byte-order-mark').file, 'base64').subarray(0, 4)], [0xef, 0xbb, 0xbf, 0x7b]);
    // Lengths are counted in UTF-16 code units: neither in code points nor in bytes.
    const limits = byName('utf-16-code-unit-limits').payload;
    assert.deepEqual([limits.license_key_prefix.length, [...limits.license_key_prefix].length], [8, 7]);
    assert.deepEqual([limits.customer_name.length, [...limits.customer_name].length], [1000, 500]);
    const refused = (name: string) => decodeLicenseFileText(data.refuse.find((vector) => vector.name === name)!.file);
    assert.deepEqual([refused('license-key-prefix-9-code-units').license_key_prefix.length, [...refused('license-key-prefix-9-code-units').license_key_prefix].length], [9, 8]);
    assert.deepEqual([refused('customer-name-1001-code-units').customer_name.length, [...refused('customer-name-1001-code-units').customer_name].length], [1001, 501]);
  });

  for (const vector of data.accept) {
    it(`accept ${vector.name}: it decodes to the payload, signs over the canonical bytes and verifies`, () => {
      const decoded = decodeLicenseFile(vector.file);
      assert.deepEqual(decoded.payload, vector.payload);
      assert.equal(Buffer.from(decoded.signedBytes).toString('hex'), vector.canonical_payload_hex);
      const ids = [vector.hardware_id, ...(vector.nfc_hardware_id === undefined ? [] : [vector.nfc_hardware_id])];
      for (const hardwareId of ids) {
        const verified = verifyLicenseFile(vector.file, { publicKey, hardwareId, now });
        assert.equal(verified.hardwareChecked, true);
        assert.deepEqual(verified.payload, vector.payload);
        assert.equal(verified.decryptionKey && Buffer.from(verified.decryptionKey).toString('hex'), vector.decryption_key_hex);
      }
      assert.throws(() => verifyLicenseFile(vector.file, { publicKey, hardwareId: 'another-machine', now }), { code: 'HARDWARE_MISMATCH' });
    });
  }

  for (const vector of data.refuse) {
    it(`refuse ${vector.name} with ${vector.code}`, () => {
      assert.throws(
        () => verifyLicenseFile(vector.file, { publicKey, now, skipHardwareCheck: true }),
        (error: unknown) => error instanceof LicenseServerError && error.code === vector.code && error.message === vector.message,
      );
    });
  }
});
