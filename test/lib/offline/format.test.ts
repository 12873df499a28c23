import assert from 'node:assert/strict';
import canonicalize from 'canonicalize';
import { canonicalPayloadText, type LicenseFilePayload } from '../../../src/lib/offline/format.js';
import { prng } from '../../support/prng.js';

describe('canonicalPayloadText', () => {
  const random = prng(0x1c5);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  // Quotes, backslashes, controls, "\ud" look-alikes, non-ASCII and astral characters: what JSON escaping can get wrong.
  const alphabet = ['a', 'Z', '0', ' ', '"', '\\', '\\ud800', '/', '\n', '\t', '\u0001', '\u007f', 'é', 'Ω', '✓', '\u2028', '😀', '<', '&'];
  const text = (max: number) => Array.from({ length: Math.floor(random() * max) }, () => pick(alphabet)).join('');

  function randomPayload(): LicenseFilePayload {
    return {
      version: 1,
      license_id: '2b9f6c1e-0a4d-4c7e-9a51-3f2d8e6b7c10',
      license_key_prefix: 'ABCD-EFG',
      customer_name: text(30),
      license_type: pick(['time_based', 'usage_based', 'hybrid'] as const),
      valid_from: '2026-01-01T00:00:00Z',
      valid_until: '2027-01-01T00:00:00Z',
      hardware_id: text(20),
      entitlements: Array.from({ length: Math.floor(random() * 4) }, (_, i) => ({
        code: `c${i}${text(5)}`,
        name: text(20),
        usage_limit: pick([null, 0, 25, Number.MAX_SAFE_INTEGER]),
      })),
      ...(random() < 0.5 ? { encrypted_key: text(80) } : {}),
      issued_at: '2026-06-01T12:00:00Z',
      issuer: text(20),
      ...(random() < 0.5 ? { key_id: '0123456789abcdef' } : {}),
    };
  }

  it('is byte for byte what RFC 8785 (the canonicalize package) makes of any payload', () => {
    for (let i = 0; i < 2000; i += 1) {
      const payload = randomPayload();
      assert.equal(canonicalPayloadText(payload), canonicalize(payload), JSON.stringify(payload));
    }
  });

  it('gives members it does not know, undefined members and odd values to the general canonicaliser', () => {
    const base = randomPayload();
    const odd: unknown[] = [
      { ...base, extra: 'x' },
      { ...base, key_id: undefined },
      { ...base, entitlements: [{ code: 'a', name: 'b', usage_limit: 1, more: true }] },
      { ...base, entitlements: [{ code: 'a', name: 'b', usage_limit: undefined }] },
      { ...base, entitlements: [{ name: 'b', usage_limit: 2, code: 'a' }] },
      { ...base, entitlements: [{ code: 'a', name: 'b', usage_limit: 1.5 }] },
      { ...base, version: -0 },
      { ...base, issuer: { nested: ['x', 1, null] } },
    ];
    for (const payload of odd) {
      assert.equal(canonicalPayloadText(payload as LicenseFilePayload), canonicalize(payload), JSON.stringify(payload));
    }
  });

  it('refuses a lone surrogate, as RFC 8785 does', () => {
    assert.throws(() => canonicalPayloadText({ ...randomPayload(), customer_name: 'a\ud800b' }), /surrogate/i);
    assert.throws(() => canonicalPayloadText({ ...randomPayload(), entitlements: [{ code: 'x', name: '\udc00', usage_limit: null }] }), /surrogate/i);
    assert.equal(canonicalPayloadText({ ...randomPayload(), customer_name: '\ud83d\ude00' }).includes('😀'), true);
  });
});
