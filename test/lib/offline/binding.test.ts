import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { deriveBindingKey, deriveBindingKeyForSealing, parseHardwareId } from '../../../src/lib/offline/binding.js';
import { prng } from '../../support/prng.js';

function refused(value: unknown): string {
  try {
    parseHardwareId(value);
  } catch (error) {
    assert.ok(error instanceof LicenseServerError);
    assert.equal(error.code, 'INVALID_HARDWARE_ID');
    return error.message;
  }
  return assert.fail(`${JSON.stringify(value)} was accepted`);
}

describe('parseHardwareId', () => {
  it('normalises to NFC, so both forms of one text name one machine', () => {
    assert.equal(parseHardwareId('HW-u\u0308'), 'HW-\u00fc');
    assert.equal(parseHardwareId('HW-\u00fc'), 'HW-\u00fc');
  });

  it('has one message for an ID that is too long: bytes of UTF-8 of the NFC form, counted', () => {
    assert.equal(refused('x'.repeat(257)), 'hardware_id must be at most 256 bytes of UTF-8, got 257');
    assert.equal(refused('\u00fc'.repeat(129)), 'hardware_id must be at most 256 bytes of UTF-8, got 258');
    // 129 decomposed u-umlauts are 258 UTF-16 code units and 387 bytes as given; their NFC form is 258 bytes.
    assert.equal(refused('u\u0308'.repeat(129)), 'hardware_id must be at most 256 bytes of UTF-8, got 258');
    assert.equal(refused('x'.repeat(100_000)), 'hardware_id must be at most 256 bytes of UTF-8, got 100000');
    assert.equal(parseHardwareId('x'.repeat(256)), 'x'.repeat(256));
    assert.equal(parseHardwareId('\u00fc'.repeat(128)), '\u00fc'.repeat(128));
  });

  it('measures the NFC form: an ID of more than 256 code units whose NFC form fits is accepted', () => {
    // "u" U+0308 U+0304 (3 code units, 5 bytes) is U+01D6 in NFC (1 code unit, 2 bytes).
    const decomposed = 'u\u0308\u0304'.repeat(86);
    assert.equal(decomposed.length, 258);
    assert.equal(parseHardwareId(decomposed), '\u01d6'.repeat(86));
  });

  it('refuses what is not a string, empty, control characters and lone surrogates, each with its message', () => {
    assert.equal(refused(42), 'hardware_id must be a string, got number');
    assert.equal(refused(null), 'hardware_id must be a string, got null');
    assert.equal(refused(''), 'hardware_id must not be empty');
    for (const control of ['a\nb', 'a\u0000', '\u007f', 'a\u0085b']) assert.equal(refused(control), 'hardware_id must not contain control characters');
    assert.equal(refused('a\ud800'), 'hardware_id must be well-formed Unicode text');
  });
});

describe('deriveBindingKeyForSealing', () => {
  it('derives what deriveBindingKey (RFC 5869 HKDF-SHA256 in JavaScript) derives, for any text, empty too', () => {
    const random = prng(0xb1d);
    const text = (max: number) => Array.from({ length: Math.floor(random() * max) }, () => String.fromCodePoint(1 + Math.floor(random() * 0x2ffff))).join('');
    for (let i = 0; i < 500; i += 1) {
      const hardwareId = i === 0 ? '' : text(80);
      const licenseId = i === 1 ? '' : i % 2 === 0 ? randomUUID() : text(40);
      assert.deepEqual(deriveBindingKeyForSealing(hardwareId, licenseId), Buffer.from(deriveBindingKey(hardwareId, licenseId)), `inputs ${i}`);
    }
  });
});
