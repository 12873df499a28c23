import { scopeAllows, type Scope } from '../lib/admin-tokens.js';

/**
 * What a token sees of a license. The full key is what a client presents to
 * /api/v1/validate: whoever holds it can take the license's seats and have its decryption
 * key sealed for machines of their choosing. So only a token that may change licenses
 * (`licenses`, or `admin`) sees it; a `read` token sees `key_prefix`, which recognises a key
 * in a list and the audit log but opens nothing.
 */
export function licenseAsSeenBy<T extends { readonly key: string }>(license: T, scopes: readonly Scope[]): T | Omit<T, 'key'> {
  if (scopeAllows(scopes, 'licenses')) return license;
  const { key: _withheld, ...seen } = license;
  return seen;
}
