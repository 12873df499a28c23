import assert from 'node:assert/strict';
import { LicenseServerError } from '../../src/lib/errors.js';
import { parseTimestamp, parseUuid, requireNonEmpty, toRfc3339Seconds } from '../../src/lib/validate.js';

const iso = (value: string, endOfDay = false) => parseTimestamp(value, 'date', { endOfDay }).toISOString();

describe('input validation', () => {
  it('reads dates as UTC days and RFC 3339 timestamps with any offset', () => {
    assert.equal(iso('2027-01-31'), '2027-01-31T00:00:00.000Z');
    assert.equal(iso('2027-01-31', true), '2027-01-31T23:59:59.000Z');
    assert.equal(iso('2027-01-31T10:00:00Z'), '2027-01-31T10:00:00.000Z');
    assert.equal(iso('2027-01-31t10:00:00.250+02:00'), '2027-01-31T08:00:00.250Z');
    assert.equal(iso('2028-02-29'), '2028-02-29T00:00:00.000Z');
    assert.equal(toRfc3339Seconds(new Date('2027-01-31T10:00:00.999Z')), '2027-01-31T10:00:00Z');
  });

  it('refuses what Date.parse would guess at', () => {
    for (const bad of ['2027-02-30', '2027-13-01', '2027-1-5', '31/01/2027', 'tomorrow', '2027-01-31T24:00:00Z', '2027-01-31T10:00:00', '2027-01-31 10:00:00Z', '']) {
      assert.throws(() => parseTimestamp(bad, 'date'), (error: unknown) => error instanceof LicenseServerError && error.code === 'INVALID_DATE', bad);
    }
  });

  it('accepts UUIDs in any case and returns them lowercase', () => {
    assert.equal(parseUuid('0B6C4F8E-3A1D-4E8E-9C2B-5F0D7A1E2C3B', 'id'), '0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b');
    for (const bad of ['', '0b6c4f8e3a1d4e8e9c2b5f0d7a1e2c3b', '../../etc/passwd', '0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3bx']) {
      assert.throws(() => parseUuid(bad, 'id'), /id must be a UUID/);
    }
  });

  it('refuses empty, overlong and control-character names', () => {
    assert.equal(requireNonEmpty('  Acme  ', 'name'), 'Acme');
    assert.throws(() => requireNonEmpty(' ', 'name'), /must not be empty/);
    assert.throws(() => requireNonEmpty('x'.repeat(201), 'name'), /at most 200/);
    assert.throws(() => requireNonEmpty('a\nb', 'name'), /control characters/);
  });
});

describe('names with lone surrogates', () => {
  it('are refused, since they cannot be written as UTF-8 into a license file', () => {
    assert.throws(() => requireNonEmpty('Acme \ud800', 'name'), /well-formed Unicode/);
    assert.throws(() => requireNonEmpty('\udc00 Acme', 'name'), /well-formed Unicode/);
    assert.equal(requireNonEmpty('Acme 🚀', 'name'), 'Acme 🚀');
  });
});
