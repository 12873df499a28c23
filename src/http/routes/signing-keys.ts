import type { RouteDependencies } from '../route-dependencies.js';
import { publicKeyFromPem } from '../../lib/crypto/ed25519-pem.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { Endorsement } from '../../lib/crypto/key-endorsement.js';
import { listEndorsements } from '../../lib/signing-keys/endorsements.js';
import { listVerifyingKeys, type SigningKeyInfo } from '../../lib/signing-keys/keys.js';
import { cacheableJson } from '../cacheable.js';
import { prepareSigningKey, retireSigningKey, rotateSigningKey } from '../../lib/signing-keys/rotation.js';
import { expectFields, expectQuery } from '../fields.js';
import type { Route } from '../router.js';

/**
 * The key set, read from the database on every request: a daemon answers a key another
 * daemon sharing the database rotated in a moment ago, so no client is ever handed a file
 * signed by a key it cannot get from any daemon. Rotation and retirement need `admin`.
 * The public key set (`/.well-known/jwks.json`, `/api/v1/signing-keys`) needs no token and
 * is rate-limited as the client routes are (access `client`), with each key's endorsements
 * (docs/public-keys.md); caches may keep it PUBLIC_MAX_AGE seconds, so a key prepared with
 * `rotate --prepare` reaches every client well before the rotation if it is done later.
 */
export function signingKeyRoutes(deps: RouteDependencies): Route[] {
  const context = (actor: string) => ({ actor, clock: deps.clock });
  const describe = ({ key_id, state, public_key_pem, fingerprint, created_at, deactivated_at }: SigningKeyInfo) => ({
    key_id,
    state,
    algorithm: 'Ed25519',
    public_key_pem,
    fingerprint,
    created_at,
    deactivated_at,
  });
  const jwk = (key: SigningKeyInfo) => ({
    kty: 'OKP',
    crv: 'Ed25519',
    x: Buffer.from(publicKeyFromPem(key.public_key_pem)).toString('base64url'),
    kid: key.key_id,
    use: 'sig',
    alg: 'EdDSA',
  });
  const published = (endorsements: readonly Endorsement[] | undefined) =>
    (endorsements ?? []).map(({ signerKeyId, signature }) => ({ signer_key_id: signerKeyId, signature: Buffer.from(signature).toString('base64url') }));
  const publicSet = async () => {
    const [keys, endorsements] = await Promise.all([listVerifyingKeys(deps.db), listEndorsements(deps.db)]);
    return { keys, endorsements };
  };
  return [
    {
      method: 'GET',
      path: '/.well-known/jwks.json',
      access: 'client',
      handle: async ({ query, ifNoneMatch }) => {
        expectQuery(query, []);
        const { keys, endorsements } = await publicSet();
        return cacheableJson({ keys: keys.map((key) => ({ ...jwk(key), endorsements: published(endorsements.get(key.key_id)) })) }, ifNoneMatch, PUBLIC_MAX_AGE);
      },
    },
    {
      method: 'GET',
      path: '/api/v1/signing-keys',
      access: 'client',
      handle: async ({ query, ifNoneMatch }) => {
        expectQuery(query, []);
        const { keys, endorsements } = await publicSet();
        // The admin description less deactivated_at, which is the operator's business.
        const described = keys.map((key) => {
          const { deactivated_at: _deactivated, ...shown } = describe(key);
          return { ...shown, endorsements: published(endorsements.get(key.key_id)) };
        });
        return cacheableJson({ active_key_id: keys.find((key) => key.state === 'active')?.key_id ?? null, keys: described }, ifNoneMatch, PUBLIC_MAX_AGE);
      },
    },
    {
      method: 'GET',
      path: '/api/signing-keys',
      access: 'admin',
      scope: 'read',
      handle: async ({ query }) => {
        expectQuery(query, []);
        const keys = await listVerifyingKeys(deps.db);
        return { json: { active_key_id: keys.find((key) => key.state === 'active')?.key_id ?? null, keys: keys.map(describe) } };
      },
    },
    {
      method: 'GET',
      path: '/api/signing-keys/jwks',
      access: 'admin',
      scope: 'read',
      handle: async ({ query }) => {
        expectQuery(query, []);
        const keys = await listVerifyingKeys(deps.db);
        return { json: { keys: keys.map(jwk) } };
      },
    },
    {
      method: 'POST',
      path: '/api/signing-keys/rotate',
      access: 'admin',
      scope: 'admin',
      handle: async ({ body, actor }) => {
        expectFields(body, [], ['prepare']);
        if (body.prepare !== undefined && typeof body.prepare !== 'boolean') throw new LicenseServerError('INVALID_INPUT', 'prepare must be true or false');
        if (body.prepare === true) {
          const next = await prepareSigningKey(deps.db, context(actor));
          return { status: next.created ? 201 : 200, json: { next: describe(next), created: next.created } };
        }
        const { previous, active } = await rotateSigningKey(deps.db, context(actor));
        return { json: { previous: describe(previous), active: describe(active) } };
      },
    },
    {
      method: 'POST',
      path: '/api/signing-keys/:key_id/retire',
      access: 'admin',
      scope: 'admin',
      handle: async ({ params, body, actor }) => {
        expectFields(body, [], ['force']);
        const force = body.force === undefined ? false : body.force;
        if (typeof force !== 'boolean') throw new LicenseServerError('INVALID_INPUT', 'force must be true or false');
        const retired = await retireSigningKey(deps.db, params.key_id!, { force, graceHours: deps.settings.grace.hours, databaseUrl: deps.settings.database.url, erase: { aroundCheckpoint: (checkpoint) => deps.state.replicator?.whilePaused(checkpoint) ?? checkpoint() } }, context(actor));
        return { json: { ...describe(retired), retired_at: retired.retired_at, forced: retired.forced, signed_valid_until: retired.signed_valid_until, erase_warning: retired.erase_warning } };
      },
    },
  ];
}

/** Seconds a cache may keep the public key set (Cache-Control: public, max-age). */
export const PUBLIC_MAX_AGE = 300;
