import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const moduleDir = fileURLToPath(new URL('../../clients/go/', import.meta.url));
// Go from Debian's golang-go, the standard library only: nothing may be downloaded.
const goEnv = { ...process.env, GOPROXY: 'off', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };

/**
 * The Done-when of issue 27 item 3 for the Go client: an application built with only the
 * first key follows a rotation through the public key set (clients/go/keyrefresh_server_test.go
 * does the client's side against this real daemon, and a loopback server of its own for
 * tampered sets).
 */
forEachEngine('the Go client refreshes its key set from a real serve process', (fixture) => {
  let serve: ServeProcess;
  let work: string;

  before(async function () {
    this.timeout(120_000);
    if (spawnSync('go', ['version'], { env: goEnv }).status !== 0) {
      // Under CI the toolchain is installed by .ci/run: its absence is a failure, not a skip.
      if (process.env.CI === 'true') throw new Error('go is not installed (Debian package golang-go)');
      this.skip();
    }
    work = mkdtempSync(path.join(tmpdir(), 'license-go-key-refresh-'));
    serve = await startServe({ LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_CLIENT_RATE_LIMIT: '0' });
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('verifies the grace token and the .lic of a rotated key after a refresh; refuses unendorsed keys; takes an allowed one', async function () {
    this.timeout(300_000);
    const admin = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: serve.token, body });
    const customer = (await admin('POST', '/api/customers', { name: 'Pendant Publishing' })).body.id;
    const license = (await admin('POST', '/api/licenses', { customer_id: customer, type: 'time_based', valid_until: '2099-12-31' })).body;
    const firstPem = (await api(serve.url, 'GET', '/api/v1/signing-keys')).body.keys[0].public_key_pem;
    const second = (await admin('POST', '/api/signing-keys/rotate', {})).body.active;
    const file = (await admin('POST', `/api/licenses/${license.id}/checkout`, { ttl_days: 30 })).body.license_file;
    assert.equal(JSON.parse(Buffer.from(file, 'base64').toString('utf8')).key_id, second.key_id);
    writeFileSync(path.join(work, 'second.lic'), file);
    const jwks = (await api(serve.url, 'GET', '/.well-known/jwks.json')).body;
    const env = {
      ...goEnv,
      KR_SERVER: new URL(serve.url).host,
      KR_LICENSE_KEY: license.key,
      KR_FIRST_KEY: firstPem,
      KR_LICENSE_FILE: path.join(work, 'second.lic'),
      KR_JWKS: JSON.stringify(jwks),
      KR_SECOND_FINGERPRINT: second.fingerprint,
      KR_WORK: work,
    };
    // Asynchronously: the daemon answers from this process's children only while the event loop runs.
    const result = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn('go', ['test', '-count=1', '-run', '^TestKeyRefreshAgainstServer$', '-v', '.'], { cwd: moduleDir, env });
      let output = '';
      child.stdout.on('data', (chunk) => (output += chunk));
      child.stderr.on('data', (chunk) => (output += chunk));
      child.on('close', (code) => resolve({ code, output }));
    });
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /^--- PASS: TestKeyRefreshAgainstServer/m);
    assert.doesNotMatch(result.output, /SKIP/);
    for (const name of ['without_a_refresh', 'with_a_refresh', 'a_key_without_a_valid_endorsement', 'a_key_the_application_allows', 'a_cache_file_cannot_add']) {
      assert.match(result.output, new RegExp(`--- PASS: TestKeyRefreshAgainstServer/${name}`), name);
    }
  });
});
