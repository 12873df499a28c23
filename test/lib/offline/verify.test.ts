import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { publicKeyOf, signEd25519 } from '../../../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, decodeLicenseFile, encodeLicenseFile, type LicenseFilePayload } from '../../../src/lib/offline/format.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';

const vectorsUrl = new URL('../../vectors/', import.meta.url);
const data = JSON.parse(readFileSync(new URL('offline-license-v1.json', vectorsUrl), 'utf8'));
const secretKey = Buffer.from(data.signing_secret_key_hex, 'hex');
const publicKey = publicKeyOf(secretKey);
const unbound: string = data.vectors[0].file;
const bound: string = data.vectors[1].file;
const boundPayload: LicenseFilePayload = data.vectors[1].payload;
const hardwareId: string = data.vectors[1].binding.hardware_id;
const now = new Date('2026-11-22T12:00:00Z');

function refusedWith(work: () => unknown, code: string, message?: RegExp): LicenseServerError {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof LicenseServerError, `expected a LicenseServerError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (message) assert.match(error.message, message);
    return error;
  }
  assert.fail(`expected ${code}`);
}

/** Signs an arbitrary object as a writer that ignored the rules would. */
function forge(object: Record<string, unknown>, key: Uint8Array = secretKey): string {
  const signature = signEd25519(canonicalPayloadBytes(object as unknown as LicenseFilePayload), key);
  return encodeLicenseFile(object as unknown as LicenseFilePayload, signature);
}

const verify = (file: string | Uint8Array, options: { hardwareId?: string; now?: Date } = {}) =>
  verifyLicenseFile(file, { publicKey, now, ...options });

describe('offline verification', () => {
  it('accepts the file with whitespace anywhere, as bytes or text', () => {
    const wrapped = unbound.trim().replace(/(.{64})/g, '$1\r\n').replace(/^/, ' \t');
    assert.equal(verify(wrapped).payload.license_id, data.vectors[0].payload.license_id);
    assert.equal(verify(Buffer.from(unbound)).hardwareChecked, true);
  });

  it('says "license not yet valid" and "license expired" outside the window, to the second', () => {
    refusedWith(() => verify(unbound, { now: new Date('2025-12-31T23:59:59Z') }), 'LICENSE_NOT_YET_VALID', /^license not yet valid/);
    assert.ok(verify(unbound, { now: new Date('2026-01-01T00:00:00Z') }));
    assert.ok(verify(unbound, { now: new Date('2026-12-31T23:59:58Z') }));
    refusedWith(() => verify(unbound, { now: new Date('2026-12-31T23:59:59Z') }), 'LICENSE_EXPIRED', /^license expired/);
  });

  it('checks the hardware binding and unseals the key only for the right machine', () => {
    const verified = verify(bound, { hardwareId });
    assert.equal(verified.decryptionKey?.length, 32);
    refusedWith(() => verify(bound, { hardwareId: 'another-machine' }), 'HARDWARE_MISMATCH', /^hardware ID mismatch: failed to decrypt license key$/);
    const boundNoKey = forge({ ...boundPayload, encrypted_key: undefined });
    refusedWith(() => verify(boundNoKey, { hardwareId: 'another-machine' }), 'HARDWARE_MISMATCH', /^hardware ID mismatch$/);
    assert.equal(verify(boundNoKey).hardwareChecked, false, 'a binding without a sealed key may be left unchecked');
  });

  it('refuses a file with encrypted_key without a hardware ID, unless the caller skips the check explicitly', () => {
    refusedWith(() => verify(bound), 'HARDWARE_ID_REQUIRED', /^hardware ID required: the file is bound to "HW-4f2a-9c1e-ü" and carries a decryption key/);
    const skipped = verifyLicenseFile(bound, { publicKey, now, skipHardwareCheck: true });
    assert.equal(skipped.hardwareChecked, false);
    assert.equal(skipped.decryptionKey, undefined);
    // Skipping the binding skips nothing else.
    refusedWith(() => verifyLicenseFile(bound, { publicKey, now: new Date('2027-01-01T00:00:00Z'), skipHardwareCheck: true }), 'LICENSE_EXPIRED');
    refusedWith(() => verifyLicenseFile(forge(boundPayload as never, Buffer.alloc(32, 9)), { publicKey, now, skipHardwareCheck: true }), 'SIGNATURE_INVALID');
  });

  it('says "failed to decrypt license key" when the sealed key does not open', () => {
    const otherSeal = forge({ ...boundPayload, encrypted_key: Buffer.alloc(60, 1).toString('base64') });
    refusedWith(() => verify(otherSeal, { hardwareId }), 'DECRYPTION_FAILED', /^failed to decrypt license key$/);
  });

  it('says "signature verification failed" for a file signed by another key', () => {
    const otherKey = Buffer.alloc(32, 9);
    refusedWith(() => verify(forge(boundPayload as never, otherKey)), 'SIGNATURE_INVALID', /^signature verification failed$/);
    refusedWith(() => verifyLicenseFile(unbound, { publicKey: publicKeyOf(otherKey), now }), 'SIGNATURE_INVALID');
  });

  it('refuses every single flipped bit anywhere in the file', () => {
    for (const file of [unbound, bound]) {
      const bytes = Buffer.from(file);
      const outcomes = new Map<string, number>();
      for (let i = 0; i < bytes.length; i += 1) {
        for (let bit = 0; bit < 8; bit += 1) {
          const flipped = Buffer.from(bytes);
          flipped[i]! ^= 1 << bit;
          let code = 'ACCEPTED';
          try {
            verify(flipped, { hardwareId });
          } catch (error) {
            assert.ok(error instanceof LicenseServerError, `byte ${i} bit ${bit}: ${String(error)}`);
            code = error.code;
          }
          assert.notEqual(code, 'ACCEPTED', `byte ${i} bit ${bit} went unnoticed`);
          outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
        }
      }
      assert.ok(outcomes.get('SIGNATURE_INVALID')! > 0 && outcomes.get('LICENSE_FILE_MALFORMED')! > 0, JSON.stringify([...outcomes]));
    }
  });

  it('refuses a file truncated at any length', () => {
    const text = bound.trim();
    for (let length = 0; length < text.length; length += 1) {
      const error = refusedWith(() => verify(text.slice(0, length), { hardwareId }), 'LICENSE_FILE_MALFORMED');
      assert.ok(!/\n\s+at /.test(error.message));
    }
  });

  it('refuses what is not Base64, not UTF-8, not JSON, not an object, each with its reason', () => {
    const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');
    refusedWith(() => verify(''), 'LICENSE_FILE_MALFORMED', /it is empty/);
    refusedWith(() => verify('not base64!'), 'LICENSE_FILE_MALFORMED', /not valid Base64/);
    refusedWith(() => verify(`${unbound.trim()}=`), 'LICENSE_FILE_MALFORMED', /not valid Base64/);
    refusedWith(() => verify(Buffer.from([0xff, 0xfe])), 'LICENSE_FILE_MALFORMED', /not ASCII/);
    refusedWith(() => verify(b64(Buffer.from([0xc3, 0x28]))), 'LICENSE_FILE_MALFORMED', /not UTF-8/);
    refusedWith(() => verify(b64('{"version":1,')), 'LICENSE_FILE_MALFORMED', /not JSON/);
    refusedWith(() => verify(b64('[1,2]')), 'LICENSE_FILE_MALFORMED', /not a JSON object/);
  });

  it('refuses a missing field, an unknown field and badly formed values', () => {
    const payload: Record<string, unknown> = { ...data.vectors[0].payload };
    const without = (field: string) => forge(Object.fromEntries(Object.entries(payload).filter(([key]) => key !== field)));
    for (const field of ['license_id', 'customer_name', 'valid_until', 'hardware_id', 'entitlements', 'issuer']) {
      refusedWith(() => verify(without(field)), 'LICENSE_FILE_MALFORMED', new RegExp(`"${field}" is missing`));
    }
    const noSignature = Buffer.from(canonicalPayloadBytes(payload as never)).toString('base64');
    refusedWith(() => verify(noSignature), 'LICENSE_FILE_MALFORMED', /"signature" is missing/);
    refusedWith(() => verify(forge({ ...payload, extra: true })), 'LICENSE_FILE_MALFORMED', /"extra" is not part of format version 1/);
    refusedWith(() => verify(forge({ ...payload, key_id: 'D75A980182B10AB7' })), 'LICENSE_FILE_MALFORMED', /"key_id" must be 16 lowercase hex digits/);
    const badValues: Array<[string, unknown, RegExp]> = [
      ['license_id', 'C2A1B9E4-5D7F-4A3B-9E1C-0F2D3B4A5C6D', /lowercase UUID/],
      ['valid_until', '2026-12-31T23:59:59.000Z', /second precision/],
      ['valid_until', '2026-02-30T00:00:00Z', /second precision/],
      ['license_type', 'perpetual', /license_type/],
      ['license_key_prefix', '7KQ2', /must be 8 UTF-16 code units$/],
      ['entitlements', [{ code: 'b', name: 'B', usage_limit: null }, { code: 'a', name: 'A', usage_limit: null }], /sorted by code/],
      ['entitlements', [{ code: 'a', name: 'A', usage_limit: 1.5 }], /usage_limit/],
      ['entitlements', [{ code: 'a', name: 'A' }], /exactly "code", "name" and "usage_limit"/],
      ['encrypted_key', 'AAAA', /encrypted_key/],
      ['valid_from', '2027-01-01T00:00:00Z', /after "valid_from"/],
    ];
    for (const [field, value, reason] of badValues) {
      refusedWith(() => verify(forge({ ...payload, [field]: value })), 'LICENSE_FILE_MALFORMED', reason);
    }
    refusedWith(() => verify(forge({ ...payload, encrypted_key: Buffer.alloc(60).toString('base64') })), 'LICENSE_FILE_MALFORMED', /requires a "hardware_id"/);
  });

  describe('the signature procedure of spec section 5.4 (parse, drop "signature", canonicalise, verify)', () => {
    /** The vector's document laid out as another JSON writer might: members reversed, indented, with CRLF. */
    const reencode = (vector: { payload: Record<string, unknown>; signature_base64: string }, change: Record<string, unknown> = {}) => {
      const document: Record<string, unknown> = { ...vector.payload, signature: vector.signature_base64, ...change };
      const reversed = Object.fromEntries(Object.entries(document).reverse());
      return Buffer.from(JSON.stringify(reversed, null, 2).replace(/\n/g, '\r\n'), 'utf8').toString('base64');
    };

    it('verifies a correctly signed file whose JSON is not in canonical form (other order and whitespace)', () => {
      for (const vector of data.vectors) {
        const file = reencode(vector);
        assert.notEqual(file.trim(), vector.file.trim());
        const options = { publicKey: data.key_set_pem, now, ...(vector.binding ? { hardwareId: vector.binding.hardware_id } : {}) };
        assert.deepEqual(verifyLicenseFile(file, options).payload, verifyLicenseFile(vector.file, options).payload, vector.name);
      }
      // Non-ASCII written as \u escapes and numbers as 25.0 are the same values too.
      const escaped = Buffer.from(
        JSON.stringify({ ...data.vectors[1].payload, signature: data.vectors[1].signature_base64 })
          .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
          .replace('"usage_limit":25', '"usage_limit":25.0'),
      ).toString('base64');
      assert.equal(verify(escaped, { hardwareId }).payload.customer_name, boundPayload.customer_name);
    });

    it('fails a re-encoded file with one changed value with "signature verification failed"', () => {
      const changes: Record<string, unknown>[] = [
        { valid_until: '2027-12-31T23:59:59Z' },
        { customer_name: 'Someone else' },
        { entitlements: [{ code: 'seats', name: 'Seats', usage_limit: 26 }] },
        { hardware_id: 'HW-some-other-machine' },
      ];
      for (const change of changes) {
        refusedWith(() => verify(reencode(data.vectors[0], change)), 'SIGNATURE_INVALID', /^signature verification failed$/);
      }
    });

    it('refuses a string with a lone surrogate escape, which has no canonical form, as malformed', () => {
      const canonical = Buffer.from(data.vectors[0].file, 'base64').toString('utf8');
      const lone = canonical.replace('"issuer":"licenses.example.com"', '"issuer":"licenses\\ud800.example.com"');
      assert.notEqual(lone, canonical);
      refusedWith(() => verify(Buffer.from(lone).toString('base64')), 'LICENSE_FILE_MALFORMED', /lone UTF-16 surrogate/);
    });

    it('refuses a member repeated in one object, whichever copy a parser would keep', () => {
      const canonical = Buffer.from(data.vectors[0].file, 'base64').toString('utf8');
      const twice = canonical.replace('"issuer":', '"issuer":"elsewhere","issuer":');
      refusedWith(() => verify(Buffer.from(twice).toString('base64')), 'LICENSE_FILE_MALFORMED', /"issuer" appears twice/);
      const nested = canonical.replace('"code":"seats"', '"code":"seats","code":"seats"');
      refusedWith(() => verify(Buffer.from(nested).toString('base64')), 'LICENSE_FILE_MALFORMED', /"code" appears twice/);
    });
  });

  it('refuses a version other than 1 and 2 before looking further', () => {
    refusedWith(() => verify(forge({ ...data.vectors[0].payload, version: 3 })), 'LICENSE_FILE_UNSUPPORTED_VERSION', /format version 3; this license-server reads versions 1 and 2$/);
    // Version 2 is read: without a member of its own it is malformed (it would be written as version 1).
    refusedWith(() => verify(forge({ ...data.vectors[0].payload, version: 2 })), 'LICENSE_FILE_MALFORMED', /a version 2 file must carry "request_nonce" or "machine_key"/);
    refusedWith(() => verify(forge({ ...data.vectors[0].payload, version: 0 })), 'LICENSE_FILE_UNSUPPORTED_VERSION');
    refusedWith(() => verify(forge({ ...data.vectors[0].payload, version: '1' })), 'LICENSE_FILE_MALFORMED', /"version"/);
  });

  it('decodes without a key for inspection', () => {
    assert.equal(decodeLicenseFile(bound).payload.hardware_id, hardwareId);
  });
});

describe('encoding', () => {
  it('places the signature where RFC 8785 puts it, for payloads of every shape', async () => {
    const { default: canonicalize } = await import('canonicalize');
    const names = ['A', 'Zürich "quoted" \\ back, "valid_from": x', '🚀 <&>', ',"valid_from":"2020-01-01T00:00:00Z"'];
    for (const customer_name of names) {
      for (const hardware_id of ['', 'hw ,"valid_from":']) {
        const payload = { ...data.vectors[0].payload, customer_name, hardware_id } as LicenseFilePayload;
        const signature = signEd25519(canonicalPayloadBytes(payload), secretKey);
        const expected = Buffer.from(canonicalize({ ...payload, signature: Buffer.from(signature).toString('base64') })!).toString('base64') + '\n';
        assert.equal(encodeLicenseFile(payload, signature), expected);
        assert.equal(verify(expected).payload.customer_name, customer_name);
      }
    }
  });
});
