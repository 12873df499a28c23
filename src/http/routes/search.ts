import { scopeAllows } from '../../lib/admin-tokens.js';
import { LICENSE_KEY_PREFIX_SYMBOLS } from '../../lib/licensing/license-key.js';
import { search, SEARCH_KINDS, type SearchResults } from '../../lib/search/search.js';
import { licenseAsSeenBy } from '../license-visibility.js';
import { expectQuery, queryInteger } from '../fields.js';
import type { RouteDependencies } from '../route-dependencies.js';
import type { Route } from '../router.js';

/**
 * The console's search box (docs/http-api.md, "Search"). A `read` token gets what its lists
 * show it: key prefixes, not keys, and a key prefix is matched only as far as the prefix it
 * sees; admin tokens, which only `admin` lists, are searched for an `admin` token alone.
 */
export function searchRoutes(deps: RouteDependencies): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/search',
      access: 'admin',
      scope: 'read',
      handle: async ({ query, scopes }) => {
        const q = expectQuery(query, ['q', 'limit']);
        const seesKeys = scopeAllows(scopes, 'licenses');
        const results: SearchResults = await search(deps.db, q.q ?? '', {
          limit: queryInteger(q.limit, 'limit'),
          kinds: SEARCH_KINDS.filter((kind) => kind !== 'admin_tokens' || scopeAllows(scopes, 'admin')),
          ...(seesKeys ? {} : { keyPrefixSymbols: LICENSE_KEY_PREFIX_SYMBOLS }),
        });
        const licenses = results.licenses && { ...results.licenses, items: results.licenses.items.map((license) => licenseAsSeenBy(license, scopes)) };
        return { json: { ...results, licenses } };
      },
    },
  ];
}
