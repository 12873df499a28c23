import assert from 'node:assert/strict';
import { LicenseServerError } from '../../src/lib/errors.js';
import { generateLicenseKey } from '../../src/lib/licensing/license-key.js';
import { describe as describeValue, escapeInvisible, hasInvisibleCharacters, parseTimestamp, parseUuid, requireNonEmpty, toRfc3339Seconds } from '../../src/lib/validate.js';

const iso = (value: string, endOfDay = false) => parseTimestamp(value, 'date', { endOfDay }).toISOString();

describe('input validation', () => {
  it('reads dates as UTC days and RFC 3339 timestamps with any offset', () => {
    assert.equal(iso('2027-01-31'), '2027-01-31T00:00:00.000Z');
    // An end date runs through its last second: the next day's 00:00:00, exclusive (valid_until).
    assert.equal(iso('2027-01-31', true), '2027-02-01T00:00:00.000Z');
    assert.equal(iso('2028-02-28', true), '2028-02-29T00:00:00.000Z');
    assert.equal(iso('2027-12-31', true), '2028-01-01T00:00:00.000Z');
    assert.throws(() => iso('9999-12-31', true), (error: unknown) => error instanceof LicenseServerError && error.code === 'INVALID_DATE' && /give a timestamp/.test(error.message));
    assert.equal(iso('9999-12-31T23:59:59Z', true), '9999-12-31T23:59:59.000Z');
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

describe('describing a caller\'s value in an error message', () => {
  const deep = (levels: number) => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`);

  it('never walks into arrays or objects, however deep or long', () => {
    assert.equal(describeValue(deep(100_000)), 'an array (1 elements)');
    assert.equal(describeValue(new Array(200_000).fill(1)), 'an array (200000 elements)');
    assert.equal(describeValue(JSON.parse(`${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`)), 'an object');
    assert.equal(describeValue(null), 'null');
    assert.equal(describeValue(undefined), 'nothing');
    assert.equal(describeValue(12.5), '12.5');
  });

  it('shows at most 40 characters of a string, escaped to printable ASCII', () => {
    const long = describeValue('a long value, '.repeat(100_000));
    assert.equal(long, `"${'a long value, '.repeat(3).slice(0, 40)}..." (1400000 characters)`);
    const hostile = describeValue('"\\\u0000\u001b[31m\u202e\ud800'.repeat(20_000));
    assert.ok(hostile.length < 80, hostile);
    assert.match(hostile, /^"[\x20-\x7e]*" \(\d+ characters\)$|^"[\x20-\x7e]*\.\.\." \(\d+ characters\)$/);
    assert.ok(!/[\u0000-\u001f\u007f-\uffff]/.test(hostile), hostile);
    assert.equal(describeValue('ab"c'), '"ab\\"c"');
  });

  it('never shows what looks like a license key or an admin token', () => {
    const key = generateLicenseKey();
    for (const secret of [key, key.toLowerCase(), key.replace(/-/g, ''), key.replace(/-/g, ' '), `prefix ${key}`, 'lsat_abcdefghijklmnop', 'ef'.repeat(32)]) {
      const shown = describeValue(secret);
      assert.match(shown, /not shown/, secret);
      assert.ok(!shown.includes(secret.slice(0, 8)) || secret.startsWith('prefix'), shown);
    }
  });

  it('shows a UUID standing alone, which is an id and no secret, and still hides one run together with a key', () => {
    const id = '0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b';
    assert.equal(describeValue(id), `"${id}"`);
    assert.equal(describeValue(id.toUpperCase()), `"${id.toUpperCase()}"`);
    assert.equal(describeValue(`${id} ${id}`), `"${`${id} ${id}`.slice(0, 40)}..." (73 characters)`);
    const key = generateLicenseKey();
    assert.match(describeValue(`${id} ${key}`), /not shown/);
    assert.match(describeValue(`${id}abcd${id}`), /not shown/, 'no longer a UUID standing alone');
  });

  it('keeps ordinary short values readable', () => {
    assert.equal(describeValue('seats'), '"seats"');
    assert.throws(() => parseUuid('../..', 'license id'), /license id must be a UUID, got "\.\.\/\.\."/);
  });
});

describe('invisible characters (token names, hardware IDs shown to people)', () => {
  it('finds bidirectional controls, zero-width, format and default-ignorable characters and line separators, and nothing visible', () => {
    const invisible = ['\u061c', '\u200b', '\u200c', '\u200d', '\u200e', '\u200f', '\u202a', '\u202e', '\u2060', '\u2066', '\u2069', '\ufeff', '\u00ad', '\u034f', '\u115f', '\u3164', '\ufe0f', '\u{e0041}', '\u2028', '\u2029'];
    for (const char of invisible) assert.equal(hasInvisibleCharacters(`a${char}b`), true, escape(char));
    for (const text of ['bootstrap', 'ci-deploy_2', 'Café', 'עברית', 'Ｂoot', 'a b', 'x\u00a0y', '😀']) assert.equal(hasInvisibleCharacters(text), false, text);
    assert.equal(escapeInvisible('HW-\u202eexe.gnp'), 'HW-\\u202eexe.gnp');
    assert.equal(escapeInvisible('tag\u{e0041}\u200b'), 'tag\\u{e0041}\\u200b');
    assert.equal(escapeInvisible('plain Café'), 'plain Café');
  });
});
