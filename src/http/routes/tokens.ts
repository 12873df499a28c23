import type { RouteDependencies } from '../route-dependencies.js';
import {
  CONFIGURED_TOKEN_ACTOR,
  createAdminToken,
  getAdminToken,
  listAdminTokensPage,
  revokeAdminToken,
  tokenNameWarningsById,
  type AdminToken,
} from '../../lib/admin-tokens.js';
import { parseDuration } from '../../lib/duration.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { Queryable } from '../../lib/storage/types.js';
import { parseUuid } from '../../lib/validate.js';
import { asString, expectFields, expectQuery, PAGING_QUERY, queryBoolean } from '../fields.js';
import { listReply } from '../list-reply.js';
import type { Route } from '../router.js';

/**
 * Admin tokens over HTTP: what `token create/list/revoke` do. Every route needs `admin`: a
 * token that can make tokens can make itself any token, so it is as strong as `admin`
 * whatever scope it were given. The secret is in the create's answer only; it is stored as
 * its hash, and the audit entry and the daemon's log never see it.
 */
export function tokenRoutes(deps: RouteDependencies): Route[] {
  const context = (actor: string) => ({ actor, clock: deps.clock });
  return [
    {
      method: 'GET',
      path: '/api/tokens',
      access: 'admin',
      scope: 'admin',
      handle: async (request) => {
        const q = expectQuery(request.query, ['include_revoked', ...PAGING_QUERY]);
        const includeRevoked = queryBoolean(q.include_revoked, 'include_revoked');
        return listReply(request, 'tokens', '/api/tokens', async (page) => {
          const tokens = await listAdminTokensPage(deps.db, { includeRevoked, ...page });
          return { items: await withWarnings(deps.db, tokens.items), next_cursor: tokens.next_cursor };
        });
      },
    },
    {
      method: 'POST',
      path: '/api/tokens',
      access: 'admin',
      scope: 'admin',
      handle: async ({ body, actor, scopes }) => {
        // `scopes` is required here, where the command line defaults to admin: an API caller
        // names what it grants rather than getting the strongest token by leaving a field out.
        expectFields(body, ['name', 'scopes'], ['expires_in']);
        const issued = await createAdminToken(
          deps.db,
          {
            name: asString(body.name, 'name'),
            scopes: asScopeList(body.scopes),
            ...(body.expires_in === undefined ? {} : { expiresInMs: parseDuration(asString(body.expires_in, 'expires_in'), 'expires_in') }),
            grantorScopes: scopes,
          },
          context(actor),
        );
        const [shown] = await withWarnings(deps.db, [issued.record]);
        return { status: 201, json: { ...shown, token: issued.token } };
      },
    },
    {
      method: 'GET',
      path: '/api/tokens/:id',
      access: 'admin',
      scope: 'admin',
      handle: async ({ params, query }) => {
        expectQuery(query, []);
        const [shown] = await withWarnings(deps.db, [await getAdminToken(deps.db, tokenId(params.id!))]);
        return { json: shown };
      },
    },
    {
      method: 'POST',
      path: '/api/tokens/:id/revoke',
      access: 'admin',
      scope: 'admin',
      handle: async ({ params, body, actor }) => {
        expectFields(body, [], ['allow_self']);
        if (body.allow_self !== undefined && typeof body.allow_self !== 'boolean') throw new LicenseServerError('INVALID_INPUT', 'allow_self must be true or false');
        const revoked = await revokeAdminToken(deps.db, tokenId(params.id!), context(actor), { allowSelf: body.allow_self === true });
        const [shown] = await withWarnings(deps.db, [revoked]);
        return { json: shown };
      },
    },
  ];
}

/** By id only, as every record in a path: names may hold any printable character. */
function tokenId(value: string): string {
  if (value === CONFIGURED_TOKEN_ACTOR) {
    throw new LicenseServerError('TOKEN_IN_CONFIGURATION', 'the configured token (admin_token, LICENSE_ADMIN_TOKEN) is not stored, so it is neither shown nor revoked here');
  }
  return parseUuid(value, 'token id');
}

function asScopeList(value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((scope) => typeof scope === 'string')) {
    throw new LicenseServerError('INVALID_INPUT', 'scopes must be an array of scope names, such as ["read"]');
  }
  return value as string[];
}

/** The record as `token list --json` gives it, with the warnings `token list` prints about its name. */
async function withWarnings(db: Queryable, tokens: readonly AdminToken[]): Promise<Array<AdminToken & { warnings: string[] }>> {
  const warnings = await tokenNameWarningsById(db, tokens);
  return tokens.map((token) => ({ ...token, warnings: warnings.get(token.id) ?? [] }));
}
