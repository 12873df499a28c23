import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { endorsementStatement, keyIdOf, LicenseClient, LicenseClientConfigError, type LicenseClientOptions } from '../../src/client/index.js';
import { ed25519 } from '@noble/curves/ed25519.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const keyIdOfFile = (file: string) => JSON.parse(Buffer.from(file, 'base64').toString('utf8')).key_id as string | undefined;

/** A loopback server that answers the public key set with `jwks` and every validation with 503 (the server is down). */
async function startKeyServer(): Promise<{ addr: string; jwks: unknown; server: Server }> {
  const state = { jwks: {} as unknown };
  const server = createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/.well-known/jwks.json') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(state.jwks));
      return;
    }
    request.resume();
    response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"DATABASE_UNAVAILABLE","message":"down"}}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.defineProperty({ addr: `127.0.0.1:${(server.address() as AddressInfo).port}`, server } as { addr: string; jwks: unknown; server: Server }, 'jwks', {
    set: (value) => (state.jwks = value),
    get: () => state.jwks,
  });
}

forEachEngine('client key refresh: an application built with the first key follows rotations', (fixture) => {
  let serve: ServeProcess;
  let work: string;
  let licenseId: string;
  let licenseKey: string;
  let firstPem: string;
  const keyIds: string[] = [];
  /** The public JWK Set with keys 1, 2 and 3, before any was retired. */
  let fullJwks: any;
  const admin = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: serve.token, body });
  const checkout = async (name: string) => {
    const file = (await admin('POST', `/api/licenses/${licenseId}/checkout`, { ttl_days: 30 })).body.license_file as string;
    writeFileSync(path.join(work, name), file);
    return keyIdOfFile(file);
  };
  const client = (overrides: { serverAddr: string; cache: string; licenseFile: string; keyRefresh?: NonNullable<LicenseClientOptions['offline']>['keyRefresh']; publicKey?: string }) =>
    new LicenseClient({
      serverAddr: overrides.serverAddr,
      licenseKey,
      version: '1.0',
      hardwareId: 'KEY-REFRESH-CLIENT',
      requestTimeout: 2000,
      connectTimeout: 500,
      offline: {
        enabled: true,
        cacheDir: path.join(work, overrides.cache),
        licenseFile: path.join(work, overrides.licenseFile),
        publicKey: overrides.publicKey ?? firstPem,
        retryInterval: 3_600_000,
        maxRetryInterval: 3_600_000,
        ...(overrides.keyRefresh ? { keyRefresh: overrides.keyRefresh } : {}),
      },
    });
  const once = async (c: LicenseClient) => {
    try {
      return await c.validate();
    } finally {
      c.close();
    }
  };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-key-refresh-'));
    serve = await startServe({ LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_CLIENT_RATE_LIMIT: '0' });
    const customer = (await admin('POST', '/api/customers', { name: 'Kramerica' })).body.id;
    const license = (await admin('POST', '/api/licenses', { customer_id: customer, type: 'time_based', valid_until: '2099-12-31' })).body;
    [licenseId, licenseKey] = [license.id, license.key];
    // What the application ships with: the first key, read from the public route.
    const set = (await api(serve.url, 'GET', '/api/v1/signing-keys')).body;
    firstPem = set.keys[0].public_key_pem;
    keyIds.push(set.keys[0].key_id);
    // A rotation without `--prepare`: the new key is made by the rotation itself.
    keyIds.push((await admin('POST', '/api/signing-keys/rotate', {})).body.active.key_id);
    assert.equal(await checkout('second.lic'), keyIds[1]);
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('without a refresh, the grace token and the .lic of the rotated key do not verify', async () => {
    const online = await once(client({ serverAddr: new URL(serve.url).host, cache: 'plain', licenseFile: 'second.lic' }));
    assert.equal(online.valid, true);
    const store = readdirOne(path.join(work, 'plain'));
    assert.equal(existsSync(path.join(store, 'grace.json')), false, 'a token of an unknown key is not cached');
    const offline = await once(client({ serverAddr: '127.0.0.1:9', cache: 'plain', licenseFile: 'second.lic' }));
    assert.equal(offline.valid, false);
    assert.match(offline.failures.find((f) => f.tier === 'license-file')!.message, new RegExp(`signed by key ${keyIds[1]}, which is not in the key set`));
  });

  it('with keyRefresh: fetches the set, verifies the grace token and the .lic of the rotated key, and keeps the keys for an offline start', async () => {
    const online = await once(client({ serverAddr: new URL(serve.url).host, cache: 'refresh', licenseFile: 'second.lic', keyRefresh: { enabled: true } }));
    assert.equal(online.valid, true);
    const store = readdirOne(path.join(work, 'refresh'));
    const grace = JSON.parse(readFileSync(path.join(store, 'grace.json'), 'utf8'));
    assert.equal(JSON.parse(Buffer.from(grace.token.split('.')[0], 'base64url').toString()).kid, keyIds[1], 'the grace token of the new key is cached');
    const cached = JSON.parse(readFileSync(path.join(store, 'keys.json'), 'utf8'));
    assert.deepEqual(cached.keys.map((key: any) => key.kid), [keyIds[1]]);

    // The server is gone: the .lic the new key signed verifies with the cached key.
    const fromFile = await once(client({ serverAddr: '127.0.0.1:9', cache: 'refresh', licenseFile: 'second.lic', keyRefresh: { enabled: true } }));
    assert.equal(fromFile.valid, true, JSON.stringify(fromFile.failures));
    assert.equal(fromFile.source, 'license-file');
    // No file: the cached grace token, also the new key's, answers.
    const fromToken = await once(client({ serverAddr: '127.0.0.1:9', cache: 'refresh', licenseFile: 'missing.lic', keyRefresh: { enabled: true } }));
    assert.equal(fromToken.valid, true, JSON.stringify(fromToken.failures));
    assert.equal(fromToken.source, 'grace-token');
  });

  it('follows 1 -> 2 -> 3 after the first key is retired, and drops a key the server retired', async () => {
    keyIds.push((await admin('POST', '/api/signing-keys/rotate', {})).body.active.key_id);
    assert.equal(await checkout('third.lic'), keyIds[2]);
    fullJwks = (await api(serve.url, 'GET', '/.well-known/jwks.json')).body;
    assert.equal((await admin('POST', `/api/signing-keys/${keyIds[0]}/retire`, { force: true })).status, 200);
    const c = client({ serverAddr: new URL(serve.url).host, cache: 'chain', licenseFile: 'third.lic', keyRefresh: { enabled: true } });
    try {
      const result = await c.refreshKeys();
      assert.equal(result.fetched, true, result.reason);
      assert.deepEqual([...result.accepted].sort(), [keyIds[1], keyIds[2]].sort());
      assert.equal((await c.validate()).valid, true);
      assert.equal((await admin('POST', `/api/signing-keys/${keyIds[1]}/retire`, { force: true })).status, 200);
      assert.deepEqual((await c.refreshKeys()).accepted, [keyIds[2]], 'the retired key 2 is no longer trusted; key 3 still is, through key 1\'s endorsement');
    } finally {
      c.close();
    }
  });

  describe('a key set served by someone else', () => {
    let fake: Awaited<ReturnType<typeof startKeyServer>>;
    before(async () => {
      fake = await startKeyServer();
    });
    after(async () => new Promise<void>((resolve) => fake.server.close(() => resolve())));
    const entry = (keyId: string) => structuredClone(fullJwks.keys.find((key: any) => key.kid === keyId));
    const offline = (cache: string, keyRefresh: NonNullable<LicenseClientOptions['offline']>['keyRefresh'] = { enabled: true }) =>
      client({ serverAddr: fake.addr, cache, licenseFile: 'third.lic', keyRefresh });

    it('refuses a key without an endorsement, one whose endorsement was tampered with, and one endorsed only by an untrusted key', async () => {
      const stranger = ed25519.utils.randomSecretKey();
      const strangerPublic = ed25519.getPublicKey(stranger);
      const third = entry(keyIds[2]!);
      const tampered = { ...third, endorsements: third.endorsements.map((e: any) => ({ ...e, signature: flipBit(e.signature) })) };
      const bare = { ...third, endorsements: [] };
      // The stranger endorses key 3 and itself is offered too, endorsed by nobody trusted.
      const byStranger = { ...third, endorsements: [{ signer_key_id: keyIdOf(strangerPublic), signature: Buffer.from(ed25519.sign(endorsementStatement(Buffer.from(third.x, 'base64url')), stranger)).toString('base64url') }] };
      const strangerJwk = { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(strangerPublic).toString('base64url'), kid: keyIdOf(strangerPublic), use: 'sig', alg: 'EdDSA', endorsements: [] };
      for (const [name, keys] of [['bare', [bare]], ['tampered', [tampered]], ['stranger', [strangerJwk, byStranger]]] as const) {
        fake.jwks = { keys };
        const c = offline(`fake-${name}`);
        try {
          const result = await c.refreshKeys();
          assert.equal(result.fetched, true, result.reason);
          assert.deepEqual(result.accepted, [], name);
          assert.deepEqual(result.trusted, [keyIds[0]], name);
          const answer = await c.validate();
          assert.equal(answer.valid, false, `${name}: the .lic of key 3 must not verify`);
        } finally {
          c.close();
        }
      }
      // A key whose kid is not its own is refused, even though the endorsement is sound.
      fake.jwks = { keys: [{ ...third, kid: keyIds[1] }] };
      const misnamed = offline('fake-misnamed');
      assert.deepEqual((await misnamed.refreshKeys()).accepted, []);
      misnamed.close();
    });

    it('accepts a key the application allows by key id and fingerprint, and nothing else by that allowance', async () => {
      const set = (await api(serve.url, 'GET', '/api/v1/signing-keys')).body;
      const fingerprint = set.keys.find((key: any) => key.key_id === keyIds[2]).fingerprint;
      fake.jwks = { keys: [{ ...entry(keyIds[2]!), endorsements: [] }] };
      const wrong = offline('fake-allow-wrong', { enabled: true, allowKeys: [{ keyId: keyIds[2]!, fingerprint: `${keyIds[2]}${'0'.repeat(48)}` }] });
      assert.deepEqual((await wrong.refreshKeys()).accepted, [], 'a fingerprint that is not the key\'s allows nothing');
      wrong.close();
      const allowed = offline('fake-allow', { enabled: true, allowKeys: [{ keyId: keyIds[2]!, fingerprint }] });
      try {
        assert.deepEqual((await allowed.refreshKeys()).accepted, [keyIds[2]]);
        const answer = await allowed.validate();
        assert.equal(answer.valid, true, JSON.stringify(answer.failures));
        assert.equal(answer.source, 'license-file');
      } finally {
        allowed.close();
      }
    });

    it('reads no set from one with "keys" and "Keys", and leaves out a key or endorsement with names that differ only in case', async () => {
      const second = entry(keyIds[1]!);
      second.endorsements = second.endorsements.filter((e: any) => e.signer_key_id === keyIds[0]);
      const refresh = async (cache: string) => {
        const c = offline(cache);
        try {
          return await c.refreshKeys();
        } finally {
          c.close();
        }
      };
      fake.jwks = { keys: [second] };
      assert.deepEqual((await refresh('fake-case-control')).accepted, [keyIds[1]], 'the sound set is taken');
      // A reader that matches names without case (Go's encoding/json) takes "Keys" here.
      fake.jwks = { keys: [second], Keys: [] };
      const twice = await refresh('fake-case-set');
      assert.deepEqual([twice.fetched, twice.reason, twice.accepted], [false, 'the server answered no key set (HTTP 200)', []]);
      fake.jwks = { keys: [{ ...second, X: entry(keyIds[2]!).x }] };
      assert.deepEqual((await refresh('fake-case-key')).accepted, [], 'x and X: the key is left out');
      fake.jwks = { keys: [{ ...second, endorsements: second.endorsements.map((e: any) => ({ ...e, Signature: flipBit(e.signature) })) }] };
      assert.deepEqual((await refresh('fake-case-endorsement')).accepted, [], 'signature and Signature: the endorsement is left out');
    });

    it('takes keys transitively from the endorsements, and a cache file cannot add a key by itself', async () => {
      // Key 2 endorsed by key 1 (trusted), key 3 only by key 2: both taken.
      const second = entry(keyIds[1]!);
      second.endorsements = second.endorsements.filter((e: any) => e.signer_key_id === keyIds[0]);
      const third = entry(keyIds[2]!);
      third.endorsements = third.endorsements.filter((e: any) => e.signer_key_id === keyIds[1]);
      assert.equal(second.endorsements.length + third.endorsements.length, 2);
      fake.jwks = { keys: [third, second] };
      const c = offline('fake-chain');
      assert.deepEqual([...(await c.refreshKeys()).accepted].sort(), [keyIds[1], keyIds[2]].sort());
      assert.equal((await c.validate()).valid, true);
      c.close();

      // Someone writes key 3 into keys.json without its endorsement: a new client does not take it.
      const store = readdirOne(path.join(work, 'fake-chain'));
      writeFileSync(path.join(store, 'keys.json'), JSON.stringify({ fetched_at: new Date().toISOString(), keys: [{ ...third, endorsements: [] }] }));
      const fromCache = offline('fake-chain');
      const answer = await fromCache.validate();
      fromCache.close();
      assert.equal(answer.valid, false, 'the .lic of key 3 does not verify from a cache file that only claims the key');
    });
  });
});

describe('offline.keyRefresh options', () => {
  const doc = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8');
  const messageFor = (keyRefresh: unknown): string => {
    try {
      new LicenseClient({ serverAddr: '127.0.0.1:1', licenseKey: 'K', version: '1', hardwareId: 'H', offline: { enabled: true, licenseFile: 'x.lic', cacheDir: '/nonexistent', publicKey: new Uint8Array(32), keyRefresh } as never }).close();
    } catch (error) {
      assert.ok(error instanceof LicenseClientConfigError, String(error));
      return error.message;
    }
    return assert.fail(`${JSON.stringify(keyRefresh)} was accepted`);
  };

  it('refuses with the messages docs/client.md lists', () => {
    const cases: Array<[unknown, string]> = [
      [[], 'keyRefresh must be an object'],
      [{ enabled: 'yes' }, 'keyRefresh.enabled must be true or false'],
      [{ intervalHours: 0 }, 'keyRefresh.intervalHours must be a positive number of hours'],
      [{ allowKeys: {} }, 'keyRefresh.allowKeys must be an array of { keyId, fingerprint }'],
      [{ allowKeys: [{ keyId: 'abc', fingerprint: 'f'.repeat(64) }] }, "keyRefresh.allowKeys[0] must be { keyId: 16 hex digits, fingerprint: the key's 64 hex digits, which begin with its key id }"],
      [{ allowKeys: [{ keyId: 'a'.repeat(16), fingerprint: 'b'.repeat(64) }] }, "keyRefresh.allowKeys[0] must be { keyId: 16 hex digits, fingerprint: the key's 64 hex digits, which begin with its key id }"],
    ];
    for (const [value, expected] of cases) {
      assert.equal(messageFor(value), expected);
      assert.ok(doc.includes(`\`${expected.replace('[0]', '[N]')}\``), `docs/client.md lists ${expected}`);
    }
  });
});

function flipBit(base64url: string): string {
  const bytes = Buffer.from(base64url, 'base64url');
  bytes[5]! ^= 1;
  return bytes.toString('base64url');
}

/** The one per-license directory the client made under a cache directory. */
function readdirOne(dir: string): string {
  const entries = readdirSync(dir);
  assert.equal(entries.length, 1, `${dir}: ${entries.join(', ')}`);
  return path.join(dir, entries[0]!);
}
