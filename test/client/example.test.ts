import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const run = promisify(execFile);
const example = fileURLToPath(new URL('../../examples/check-license.mjs', import.meta.url));

describe('examples/check-license.mjs', () => {
  let work: string;
  let serve: ServeProcess;
  let env: Record<string, string>;

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-example-'));
    serve = await startServe({ LICENSE_DATABASE_URL: path.join(work, 'server.db') });
    const token = serve.token!;
    const pem = (await api(serve.url, 'GET', '/api/signing-key', { token })).body.public_key_pem;
    const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Example' } })).body;
    for (const code of ['seats', 'export']) await api(serve.url, 'POST', '/api/entitlements', { token, body: { code, name: code } });
    const license = (await api(serve.url, 'POST', '/api/licenses', {
      token,
      body: { customer_id: customer.id, type: 'hybrid', valid_from: '2025-01-01', valid_until: '2099-01-01', with_decryption_key: true, entitlements: [{ code: 'seats', usage_limit: 10 }, { code: 'export' }] },
    })).body;
    const file = await api(serve.url, 'POST', `/api/licenses/${license.id}/checkout`, { token, body: { ttl_days: 30, hardware_id: 'example-machine' } });
    writeFileSync(path.join(work, 'license.lic'), file.body.license_file);
    writeFileSync(path.join(work, 'signing-key.pem'), pem);
    env = {
      ...process.env,
      LICENSE_SERVER: new URL(serve.url).host,
      LICENSE_KEY: license.key,
      PUBLIC_KEY_FILE: path.join(work, 'signing-key.pem'),
      LICENSE_FILE: path.join(work, 'license.lic'),
      HARDWARE_ID: 'example-machine',
      CACHE_DIR: path.join(work, 'cache'),
      USAGE_CODE: 'seats',
    } as Record<string, string>;
  });
  after(async () => {
    await serve?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('runs as documented: online, then offline from the .lic file with usage queued', async () => {
    const online = await run(process.execPath, [example], { env });
    assert.match(online.stdout, /^license valid \(online\)$/m);
    assert.match(online.stdout, /^entitlements: export, seats$/m);
    assert.match(online.stdout, /^decryption key: available \(32 bytes\)$/m);
    assert.match(online.stdout, /^usage counted, 9 left$/m);
    await serve.stop();
    const offline = await run(process.execPath, [example], { env });
    assert.match(offline.stdout, /^offline mode: 7\d\.\d h of grace left$/m);
    assert.match(offline.stdout, /^license valid \(offline, from the license-file\)$/m);
    assert.match(offline.stdout, /^entitlements: export \(restricted offline\), seats$/m);
    assert.match(offline.stdout, /^usage queued until the server is back$/m);
  });
});
