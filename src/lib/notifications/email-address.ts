/**
 * The shapes of address this server puts into mail headers. Deliberately narrower than
 * RFC 5322: no comments, no quoted local parts, no groups, no lists. Anything richer is a
 * way to smuggle a second recipient or a header in through a template value.
 */

// Printable ASCII or non-ASCII (for internationalised addresses), without space, comma,
// semicolon, angle brackets, quotes, parentheses, brackets, backslash or a second "@".
const ATOM = String.raw`[^\s\x00-\x1f\x7f,;<>"'()[\]\\@]+`;
const PLAIN = new RegExp(`^${ATOM}@${ATOM}$`, 'u');

/** One bare address such as ops@example.com, and nothing else. */
export function isPlainAddress(text: string): boolean {
  return text.length <= 254 && PLAIN.test(text) && !/\.\.|^\.|\.@|@\.|\.$/.test(text);
}

/**
 * The address of a From setting: either a plain address or `Display Name <address>` with a
 * display name of printable characters without quotes or angle brackets. Undefined if neither.
 */
export function mailboxAddress(from: string): string | undefined {
  const text = from.trim();
  if (isPlainAddress(text)) return text;
  const named = /^([^<>"\x00-\x1f\x7f]*)<([^<>]+)>$/u.exec(text);
  if (named && isPlainAddress(named[2]!)) return named[2]!;
  return undefined;
}

/** The domain of a plain address (for Message-ID). */
export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1);
}
