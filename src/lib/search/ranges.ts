import { LICENSE_KEY_ALPHABET, LICENSE_KEY_GROUP_LENGTH, LICENSE_KEY_SYMBOLS } from '../licensing/license-key.js';

/**
 * Prefix searches as ranges, `from <= value < to`, so that an ordinary B-tree answers them
 * (a LIKE 'abc%' would need a collation or operator class of its own on each engine). `to`
 * is undefined when nothing follows every string with the prefix.
 */
export interface Range {
  readonly from: string;
  readonly to: string | undefined;
}

/**
 * Every string starting with `prefix`, in code point order (SQLite's BINARY, PostgreSQL's
 * "C": both compare UTF-8 bytes, which sort as code points do): the prefix with its last
 * code point raised by one. U+10FFFF cannot be raised, so it is dropped and the one before
 * raised; surrogates are skipped, since UTF-8 has none.
 */
export function prefixRange(prefix: string): Range {
  const points = [...prefix].map((char) => char.codePointAt(0)!);
  while (points.length > 0) {
    let last = points.pop()! + 1;
    if (last === 0xd800) last = 0xe000;
    if (last <= 0x10ffff) return { from: prefix, to: String.fromCodePoint(...points, last) };
  }
  return { from: prefix, to: undefined };
}

/** What a query can be of a license key: the whole key, or the stored form of a prefix of it. */
export type KeyQuery = { readonly whole: string } | { readonly range: Range; readonly symbols: number };

/**
 * A query read as a license key or the start of one, as normalizeLicenseKey reads a key:
 * case, spaces and dashes do not matter, and Crockford's look-alikes O, I and L are 0, 1 and
 * 1. Undefined when it cannot be (a letter U, punctuation, more than a key's symbols).
 *
 * A prefix becomes a range in the stored form, `XXXX-XXXX-...`: the dashes put back where
 * the key has them, and the end the same prefix with its last symbol raised to the next one
 * of the key alphabet (carrying over a Z). Both ends are made of the key's own symbols and
 * dashes at the key's own places, so the range holds exactly the keys with that prefix under
 * any collation the unique index on license_key may have: digits before letters, letters in
 * alphabetical order, and a dash at the same place in every key.
 */
export function keyQuery(query: string, maxPrefixSymbols = LICENSE_KEY_SYMBOLS): KeyQuery | undefined {
  const symbols = query.toUpperCase().replace(/[\s-]/g, '').replace(/O/g, '0').replace(/[IL]/g, '1');
  if (symbols.length === 0 || symbols.length > LICENSE_KEY_SYMBOLS) return undefined;
  if ([...symbols].some((symbol) => !LICENSE_KEY_ALPHABET.includes(symbol))) return undefined;
  if (symbols.length === LICENSE_KEY_SYMBOLS) return { whole: grouped(symbols) };
  const prefix = symbols.slice(0, maxPrefixSymbols);
  return { range: { from: grouped(prefix), to: nextPrefix(prefix) }, symbols: prefix.length };
}

function grouped(symbols: string): string {
  return symbols.match(new RegExp(`.{1,${LICENSE_KEY_GROUP_LENGTH}}`, 'g'))!.join('-');
}

function nextPrefix(symbols: string): string | undefined {
  const chars = [...symbols];
  while (chars.length > 0) {
    const at = LICENSE_KEY_ALPHABET.indexOf(chars.pop()!);
    if (at < LICENSE_KEY_ALPHABET.length - 1) return grouped([...chars, LICENSE_KEY_ALPHABET[at + 1]!].join(''));
  }
  return undefined;
}
