/** Hides the password of a postgres:// URL (in the user-info part or a password= parameter). */
export function redactDatabaseUrl(url: string): string {
  if (!/^postgres(ql)?:\/\//i.test(url)) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
    return parsed.toString();
  } catch {
    return 'postgres://[unparseable URL redacted]';
  }
}

/** What stands for a hidden part of a URL. */
export const REDACTED_URL_PART = '***';

/**
 * Hides the parts of a URL that carry credentials: the password (and the user name when it
 * is the only credential, as with `https://TOKEN@host/`), the whole query string (`?token=`,
 * `?code=`, `?sig=`: webhook providers put keys there) and the fragment:
 * `https://user:***@host/path?***`. The scheme, host, port and path stay, so that the
 * operator can still tell one URL from another; a secret in the path is not recognised.
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '[unparseable URL redacted]';
  }
  if (parsed.password) parsed.password = REDACTED_URL_PART;
  else if (parsed.username) parsed.username = REDACTED_URL_PART;
  if (parsed.search) parsed.search = REDACTED_URL_PART;
  if (parsed.hash) parsed.hash = REDACTED_URL_PART;
  return parsed.toString();
}

/**
 * The inverse of redactUrl for a URL that was shown redacted, edited and given back: each
 * part that is still `***` is taken from the stored URL. Returns the URL unchanged when
 * nothing in it is redacted; throws when a redacted part has nothing stored to come from.
 */
export function unredactUrl(given: string, stored: string | undefined): string {
  const parsed = new URL(given);
  const parts = (['username', 'password', 'search', 'hash'] as const).filter((part) => parsed[part].replace(/^[?#]/, '') === REDACTED_URL_PART);
  if (parts.length === 0) return given;
  const original = stored === undefined ? undefined : new URL(stored);
  for (const part of parts) {
    if (!original?.[part]) throw new Error(`its ${part === 'search' ? 'query' : part === 'hash' ? 'fragment' : part} is redacted (${REDACTED_URL_PART}) and there is no stored URL with one to keep`);
    parsed[part] = original[part];
  }
  return parsed.toString();
}
