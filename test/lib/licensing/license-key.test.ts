import assert from 'node:assert/strict';
import { generateLicenseKey, LICENSE_KEY_ENTROPY_BITS, licenseKeyPrefix, normalizeLicenseKey } from '../../../src/lib/licensing/license-key.js';

describe('license keys', () => {
  it('are seven groups of four from an alphabet without I, L, O or U, carrying at least 128 bits', () => {
    const key = generateLicenseKey();
    assert.match(key, /^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){6}$/);
    assert.ok(LICENSE_KEY_ENTROPY_BITS >= 128);
    assert.equal(licenseKeyPrefix(key), key.slice(0, 8));
    assert.equal(licenseKeyPrefix(key).length, 8);
  });

  it('use every symbol about equally often (no modulo bias, no stuck positions)', () => {
    const counts = new Map<string, number>();
    const keys = new Set<string>();
    for (let i = 0; i < 4000; i += 1) {
      const key = generateLicenseKey();
      keys.add(key);
      for (const symbol of key.replace(/-/g, '')) counts.set(symbol, (counts.get(symbol) ?? 0) + 1);
    }
    assert.equal(keys.size, 4000, 'no repeats');
    assert.equal(counts.size, 32);
    const expected = (4000 * 28) / 32;
    for (const [symbol, count] of counts) assert.ok(Math.abs(count - expected) < expected * 0.15, `${symbol}: ${count}`);
  });

  it('are normalised from what people type: case, spaces, missing hyphens and look-alikes', () => {
    const key = 'AB01-CD23-EF45-GH67-JK89-MNPQ-RSTV';
    assert.equal(normalizeLicenseKey(key), key);
    assert.equal(normalizeLicenseKey(' ab0l-cd23 ef45-gh67-jk89-mnpq-rstv '), key);
    assert.equal(normalizeLicenseKey('ABO1CD23EF45GH67JK89MNPQRSTV'), key);
    assert.equal(normalizeLicenseKey('AB01-CD23-EF45-GH67-JK89-MNPQ-RST'), undefined, 'too short');
    assert.equal(normalizeLicenseKey('AB01-CD23-EF45-GH67-JK89-MNPQ-RSTU'), undefined, 'U is not in the alphabet');
    assert.equal(normalizeLicenseKey('0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b'), undefined);
  });
});
