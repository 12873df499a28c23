import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LicenseClient } from '../../src/client/index.js';
import { verifyGraceToken } from '../../src/lib/licensing/grace-token.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const keyIdOfFile = (file: string) => JSON.parse(Buffer.from(file, 'base64').toString('utf8')).key_id as string | undefined;
const kidOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString('utf8')).kid as string;

/** Two daemons sharing one database switch signing keys together. */
forEachEngine('signing key rotation across two daemons', (fixture) => {
  let first: ServeProcess;
  let second: ServeProcess;
  let admin: string;
  let licenseId: string;
  let licenseKey: string;
  const call = (base: string, method: string, route: string, body?: unknown) => api(base, method, route, { token: admin, body });
  const checkout = async (base: string) => (await call(base, 'POST', `/api/licenses/${licenseId}/checkout`, { ttl_days: 30 })).body.license_file as string;
  const graceToken = async (base: string, hardwareId: string) =>
    (await api(base, 'POST', '/api/v1/validate', { body: { license_key: licenseKey, hardware_id: hardwareId, version: '1.0' } })).body.grace_token as string;

  before(async () => {
    const env = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_CLIENT_RATE_LIMIT: '0' };
    first = await startServe(env);
    second = await startServe(env);
    admin = first.token!;
    const customer = (await call(first.url, 'POST', '/api/customers', { name: 'Vandelay' })).body.id;
    const license = (await call(first.url, 'POST', '/api/licenses', { customer_id: customer, type: 'time_based', valid_until: '2099-12-31' })).body;
    licenseId = license.id;
    licenseKey = license.key;
  });
  after(async () => {
    for (const serve of [first, second]) if (serve) assert.equal((await serve.stop()).code, 0);
  });

  it('after a rotation on one daemon, the other signs with the new key at once and both answer the same key set', async () => {
    const oldFile = await checkout(second.url);
    const oldToken = await graceToken(second.url, 'HOST-OLD');
    const before = (await call(first.url, 'GET', '/api/signing-keys')).body;
    assert.equal(before.keys.length, 1);
    assert.equal(kidOf(oldToken), before.active_key_id);

    const rotated = await call(first.url, 'POST', '/api/signing-keys/rotate', {});
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const newKeyId = rotated.body.active.key_id;
    for (const serve of [first, second]) {
      assert.equal(keyIdOfFile(await checkout(serve.url)), newKeyId, 'the next file of either daemon carries the new key id');
      assert.equal(kidOf(await graceToken(serve.url, `HOST-${serve.url}`)), newKeyId);
      const set = (await call(serve.url, 'GET', '/api/signing-keys')).body;
      assert.deepEqual(set.keys.map((k: any) => [k.key_id, k.state]), [[newKeyId, 'active'], [before.active_key_id, 'verify-only']]);
      const jwks = (await call(serve.url, 'GET', '/api/signing-keys/jwks')).body;
      assert.deepEqual(jwks.keys.map((k: any) => [k.kid, k.kty, k.crv, k.alg]), [[newKeyId, 'OKP', 'Ed25519', 'EdDSA'], [before.active_key_id, 'OKP', 'Ed25519', 'EdDSA']]);
    }
    // What was signed before verifies with the set either daemon answers; so does what is signed now.
    const pems = (await call(second.url, 'GET', '/api/signing-keys')).body.keys.map((k: any) => k.public_key_pem);
    const now = new Date();
    assert.equal(verifyLicenseFile(oldFile, { publicKey: pems, now }).payload.license_id, licenseId);
    assert.equal(verifyLicenseFile(await checkout(first.url), { publicKey: pems, now }).payload.key_id, newKeyId);
    assert.equal(verifyGraceToken(oldToken, pems, { now }).claims.license_id, licenseId);
    assert.throws(() => verifyLicenseFile(oldFile, { publicKey: [pems[0]], now }), /signature verification failed/);

    // The client library, given the set: online against the other daemon (its grace token is
    // the new key's and is cached), then offline from the file the old key signed.
    const work = mkdtempSync(path.join(tmpdir(), 'license-client-rotation-'));
    try {
      writeFileSync(path.join(work, 'old.lic'), oldFile);
      const client = (serverAddr: string) => new LicenseClient({
        serverAddr, licenseKey, version: '1.0', hardwareId: 'ROTATION-CLIENT', requestTimeout: 2000,
        offline: { enabled: true, cacheDir: path.join(work, 'cache'), licenseFile: path.join(work, 'old.lic'), publicKey: pems },
      });
      const online = client(new URL(second.url).host);
      assert.equal((await online.validate()).valid, true);
      online.close();
      const offline = client('127.0.0.1:9');
      const answer = await offline.validate();
      offline.close();
      assert.equal(answer.valid, true, JSON.stringify(answer));
      assert.equal(answer.source, 'license-file', 'the file the old key signed answers');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('two rotations at the same moment on the two daemons: one wins, the other changes nothing, never two active keys', async () => {
    const before = (await call(first.url, 'GET', '/api/signing-keys')).body;
    for (let round = 0; round < 3; round += 1) {
      const answers = await Promise.all([first, second].map((serve) => call(serve.url, 'POST', '/api/signing-keys/rotate', {})));
            // Both may succeed one after the other (each read the key the other had just made);
      // when they raced for the same key, the loser says so and changed nothing.
      assert.ok(answers.map((answer) => answer.status).every((status) => status === 200 || status === 409), JSON.stringify(answers.map((a) => a.body)));
      for (const answer of answers.filter((a) => a.status === 409)) assert.equal(answer.body.error.code, 'SIGNING_KEY_CONFLICT');
      const set = (await call(second.url, 'GET', '/api/signing-keys')).body;
      assert.equal(set.keys.filter((k: any) => k.state === 'active').length, 1);
      assert.equal(set.keys.length, before.keys.length + answers.filter((a) => a.status === 200).length, 'a refused rotation added no key');
      before.keys = set.keys;
    }
    const retire = await call(first.url, 'POST', `/api/signing-keys/${before.keys[0].key_id}/retire`, {});
    assert.equal(retire.status, 422);
    assert.equal(retire.body.error.code, 'SIGNING_KEY_ACTIVE');
  });
});
