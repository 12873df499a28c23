import { randomBytes } from 'node:crypto';

/**
 * Crockford's Base32 alphabet: no I, L, O or U, so a key read aloud or typed from paper
 * cannot be mistaken. 32 symbols divide 256 evenly, so `byte & 31` is unbiased.
 */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const GROUPS = 7;
const GROUP_LENGTH = 4;

/** The key's symbols in ascending order (code point order, and any collation's for them). */
export const LICENSE_KEY_ALPHABET = ALPHABET;
export const LICENSE_KEY_GROUP_LENGTH = GROUP_LENGTH;
/** Symbols in a whole key, dashes not counted. */
export const LICENSE_KEY_SYMBOLS = GROUPS * GROUP_LENGTH;
/** Symbols in licenseKeyPrefix: what a `read` token sees of a key. */
export const LICENSE_KEY_PREFIX_SYMBOLS = 7;

/** 28 symbols of 5 bits: 140 bits from the CSPRNG, shown as XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX. */
export function generateLicenseKey(): string {
  const bytes = randomBytes(GROUPS * GROUP_LENGTH);
  const symbols = [...bytes].map((byte) => ALPHABET[byte & 31]);
  const groups: string[] = [];
  for (let i = 0; i < GROUPS; i += 1) groups.push(symbols.slice(i * GROUP_LENGTH, (i + 1) * GROUP_LENGTH).join(''));
  return groups.join('-');
}

export const LICENSE_KEY_ENTROPY_BITS = GROUPS * GROUP_LENGTH * 5;

/** The spec's `license_key_prefix`: the first 8 characters of the key as written, hyphen included. */
export function licenseKeyPrefix(key: string): string {
  return key.slice(0, 8);
}

/**
 * The canonical form of a key as a person might type it: case-insensitive, spaces
 * ignored, and the look-alikes O, I and L read as 0, 1 and 1 (Crockford's decoding).
 * Returns undefined when it cannot be a key of ours.
 */
export function normalizeLicenseKey(input: string): string | undefined {
  const symbols = input
    .toUpperCase()
    .replace(/[\s-]/g, '')
    .replace(/O/g, '0')
    .replace(/[IL]/g, '1');
  if (symbols.length !== GROUPS * GROUP_LENGTH) return undefined;
  for (const symbol of symbols) if (!ALPHABET.includes(symbol)) return undefined;
  return symbols.match(/.{4}/g)!.join('-');
}
