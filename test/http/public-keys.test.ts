import assert from 'node:assert/strict';
import { publicKeyFromPem } from '../../src/lib/crypto/ed25519-pem.js';
import { verifyEndorsement } from '../../src/lib/crypto/key-endorsement.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { forEachEngine } from '../support/engines.js';
import { api, rawRequest, startServe, type ServeProcess } from '../support/serve.js';

const ROUTES = ['/.well-known/jwks.json', '/api/v1/signing-keys'] as const;

/** Each key's endorsements, checked against the key set's own public keys: [key, signer] pairs that verify. */
function verifiedEndorsements(set: any): string[] {
  const keys = new Map<string, Uint8Array>(set.keys.map((key: any) => [key.key_id, publicKeyFromPem(key.public_key_pem)]));
  const pairs: string[] = [];
  for (const key of set.keys) {
    for (const endorsement of key.endorsements) {
      const signer = keys.get(endorsement.signer_key_id);
      const signature = Buffer.from(endorsement.signature, 'base64url');
      if (signer && verifyEndorsement(signer, keys.get(key.key_id)!, signature)) pairs.push(`${key.key_id}<-${endorsement.signer_key_id}`);
      else if (!signer) pairs.push(`${key.key_id}<-${endorsement.signer_key_id} (signer not in the set)`);
    }
  }
  return pairs.sort();
}

forEachEngine('public key set: GET /.well-known/jwks.json and GET /api/v1/signing-keys', (fixture) => {
  let serve: ServeProcess;
  let url: string;
  const admin = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: serve.token, body });
  const pemSet = async () => (await api(serve.url, 'GET', '/api/v1/signing-keys')).body;

  before(async () => {
    url = await fixture.freshUrl();
    serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_CLIENT_RATE_LIMIT: '0' });
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
  });

  it('answers without a token, cacheable, with a strong ETag; If-None-Match gives 304 without a body', async () => {
    for (const route of ROUTES) {
      const first = await api(serve.url, 'GET', route);
      assert.equal(first.status, 200, `${route}: ${first.text}`);
      assert.equal(first.headers.get('cache-control'), 'public, max-age=300');
      assert.equal(first.headers.get('content-type'), 'application/json; charset=utf-8');
      const etag = first.headers.get('etag')!;
      assert.match(etag, /^"[A-Za-z0-9_-]{43}"$/, 'a strong ETag: the SHA-256 of the body');
      assert.equal((await api(serve.url, 'GET', route)).headers.get('etag'), etag, 'the same body, the same ETag');
      for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const again = await rawRequest(serve.url, 'GET', route, { headers: { 'if-none-match': header } });
        assert.equal(again.status, 304, `${route} If-None-Match: ${header}`);
        assert.equal(again.text, '');
        assert.equal(again.headers.etag, etag);
        assert.equal(again.headers['cache-control'], 'public, max-age=300');
        assert.equal(again.headers['content-length'], undefined, 'no Content-Length of an empty body on a 304');
      }
      const stale = await api(serve.url, 'GET', route, { headers: { 'if-none-match': '"not-this-one"' } });
      assert.equal(stale.status, 200);
      assert.equal(stale.text, first.text);
      const head = await rawRequest(serve.url, 'HEAD', route);
      assert.equal(head.status, 200);
      assert.equal(head.headers.etag, etag);
    }
    // The admin routes stay behind a token.
    for (const route of ['/api/signing-key', '/api/signing-keys', '/api/signing-keys/jwks']) assert.equal((await api(serve.url, 'GET', route)).status, 401, route);
  });

  it('lists the active, the next and the verify-only keys with their endorsements, and a retired key no more', async () => {
    const initial = await pemSet();
    assert.equal(initial.keys.length, 1);
    const first = initial.keys[0];
    assert.deepEqual(Object.keys(first).sort(), ['algorithm', 'created_at', 'endorsements', 'fingerprint', 'key_id', 'public_key_pem', 'state']);
    assert.deepEqual([first.state, first.algorithm, first.endorsements], ['active', 'Ed25519', []]);
    assert.equal(initial.active_key_id, first.key_id);
    const etagBefore = (await api(serve.url, 'GET', '/.well-known/jwks.json')).headers.get('etag')!;

    const prepared = await admin('POST', '/api/signing-keys/rotate', { prepare: true });
    assert.equal(prepared.status, 201, prepared.text);
    const second = prepared.body.next.key_id;
    let set = await pemSet();
    assert.deepEqual(set.keys.map((key: any) => [key.key_id, key.state]), [[first.key_id, 'active'], [second, 'next']]);
    // Each key that holds its private half endorses the other: the next key is endorsed by the active one.
    assert.deepEqual(verifiedEndorsements(set), [`${first.key_id}<-${second}`, `${second}<-${first.key_id}`].sort());
    const stale = await rawRequest(serve.url, 'GET', '/.well-known/jwks.json', { headers: { 'if-none-match': etagBefore } });
    assert.equal(stale.status, 200, 'a changed set is a new ETag');

    const rotated = await admin('POST', '/api/signing-keys/rotate', {});
    assert.equal(rotated.body.active.key_id, second);
    const made = await admin('POST', '/api/signing-keys/rotate', {});
    const third = made.body.active.key_id;
    set = await pemSet();
    assert.deepEqual(set.keys.map((key: any) => [key.key_id, key.state]), [[third, 'active'], [second, 'verify-only'], [first.key_id, 'verify-only']]);
    const jwks = (await api(serve.url, 'GET', '/.well-known/jwks.json')).body;
    assert.deepEqual(jwks.keys.map((key: any) => [key.kid, key.kty, key.crv, key.use, key.alg]), set.keys.map((key: any) => [key.key_id, 'OKP', 'Ed25519', 'sig', 'EdDSA']));
    for (const [i, key] of jwks.keys.entries()) {
      assert.deepEqual(Buffer.from(key.x, 'base64url'), Buffer.from(publicKeyFromPem(set.keys[i].public_key_pem)));
      assert.deepEqual(key.endorsements, set.keys[i].endorsements, 'the same endorsements on both routes');
    }
    assert.ok(verifiedEndorsements(set).includes(`${third}<-${first.key_id}`), 'a key made by rotate is endorsed by the keys before it');

    const retired = await admin('POST', `/api/signing-keys/${first.key_id}/retire`, { force: true });
    assert.equal(retired.status, 200, retired.text);
    set = await pemSet();
    assert.deepEqual(set.keys.map((key: any) => key.key_id), [third, second], 'the retired key is gone');
    assert.ok(!(await api(serve.url, 'GET', '/.well-known/jwks.json')).body.keys.some((key: any) => key.kid === first.key_id));
    // What the retired key signed stays published: a client built with it follows on.
    assert.ok(verifiedEndorsements(set).includes(`${third}<-${first.key_id} (signer not in the set)`));
    const kept = set.keys[0].endorsements.find((e: any) => e.signer_key_id === first.key_id);
    assert.ok(verifyEndorsement(publicKeyFromPem(first.public_key_pem), publicKeyFromPem(set.keys[0].public_key_pem), Buffer.from(kept.signature, 'base64url')));
  });

  it('a store whose keys lack endorsements (made before them) has them after the daemon starts', async () => {
    assert.equal((await serve.stop()).code, 0);
    const db = await openDatabase(url);
    try {
      await db.execute('DELETE FROM signing_key_endorsements');
    } finally {
      await db.close();
    }
    serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_CLIENT_RATE_LIMIT: '0' });
    const set = await pemSet();
    assert.deepEqual(verifiedEndorsements(set), [`${set.keys[0].key_id}<-${set.keys[1].key_id}`, `${set.keys[1].key_id}<-${set.keys[0].key_id}`].sort());
  });
});

describe('public key set: rate limit', () => {
  it('is limited per address like the client routes: 429 with Retry-After after the burst', async () => {
    const serve = await startServe({ LICENSE_CLIENT_RATE_LIMIT: '1', LICENSE_CLIENT_RATE_BURST: '3' });
    try {
      const statuses: Array<{ status: number; retry: string | null; code?: string }> = [];
      for (const route of [...ROUTES, ...ROUTES]) {
        const answer = await api(serve.url, 'GET', route);
        statuses.push({ status: answer.status, retry: answer.headers.get('retry-after'), code: answer.body?.error?.code });
      }
      assert.deepEqual(statuses.map((s) => s.status), [200, 200, 200, 429]);
      assert.deepEqual(statuses[3], { status: 429, retry: '1', code: 'RATE_LIMITED' });
    } finally {
      assert.equal((await serve.stop()).code, 0);
    }
  });
});
