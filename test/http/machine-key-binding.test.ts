import assert from 'node:assert/strict';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';
import { activationRequestFor } from '../support/activation-request.js';
import { generateKeyPair } from '../../src/lib/crypto/hpke.js';
import { encodeMachineKey } from '../../src/lib/offline/machine-key.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';

/**
 * The binding over HTTP (docs/http-api.md): a License body carries `binding`, POST and PATCH
 * take it, and the checkout of a machine-key license with a bare hardware_id is
 * 422 MACHINE_KEY_REQUIRED. Every answer is checked against docs/openapi.json.
 */
forEachEngine('license binding over HTTP', (fixture) => {
  let serve: ServeProcess;
  const call = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: serve.token!, body });
  let customerId: string;

  before(async () => {
    serve = await startServe({ LICENSE_DATABASE_URL: await fixture.freshUrl() });
    customerId = (await call('POST', '/api/customers', { name: 'Air-gapped GmbH' })).body.id;
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
  });

  it('creates, reads and changes the binding; refuses a bare hardware ID for a machine-key license', async () => {
    const created = await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', with_decryption_key: true, binding: 'machine-key' });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.binding, 'machine-key');
    assert.equal((await call('GET', `/api/licenses/${created.body.id}`)).body.binding, 'machine-key');

    const refused = await call('POST', `/api/licenses/${created.body.id}/checkout`, { ttl_days: 30, hardware_id: 'hw2-a' });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.error.code, 'MACHINE_KEY_REQUIRED');

    const plain = await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', with_decryption_key: true });
    assert.equal(plain.body.binding, 'hardware-id');
    const checkout = await call('POST', `/api/licenses/${plain.body.id}/checkout`, { ttl_days: 30, hardware_id: 'hw2-a' });
    assert.equal(checkout.status, 200, checkout.text);
    assert.equal(JSON.parse(Buffer.from(checkout.body.license_file, 'base64').toString('utf8')).version, 1, 'a hardware-ID license stays version 1');

    const changed = await call('PATCH', `/api/licenses/${plain.body.id}`, { binding: 'machine-key' });
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(changed.body.changes.binding, { before: 'hardware-id', after: 'machine-key' });
    assert.equal((await call('POST', `/api/licenses/${plain.body.id}/checkout`, { ttl_days: 30, hardware_id: 'hw2-a' })).body.error.code, 'MACHINE_KEY_REQUIRED');

    const bad = await call('PATCH', `/api/licenses/${plain.body.id}`, { binding: 'machine' });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.error.code, 'INVALID_INPUT');
  });

  it('checks a machine-key license out with an activation request: request_nonce, machine_key and the HPKE-sealed key', async () => {
    const created = await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', with_decryption_key: true, binding: 'machine-key' });
    const machine = generateKeyPair();
    const { text, request } = activationRequestFor(created.body.key, 'hw2-by-request', { machine_key: encodeMachineKey(machine.publicKey) });
    const checkout = await call('POST', `/api/licenses/${created.body.id}/checkout`, { ttl_days: 30, request: text });
    assert.equal(checkout.status, 200, checkout.text);
    const payload = JSON.parse(Buffer.from(checkout.body.license_file, 'base64').toString('utf8'));
    assert.deepEqual([payload.version, payload.request_nonce, payload.machine_key, payload.hardware_id], [2, request.nonce, request.machine_key, 'hw2-by-request']);
    const { decryptionKey } = verifyLicenseFile(checkout.body.license_file, { publicKey: (await call('GET', '/api/signing-key')).body.public_key_pem, hardwareId: 'hw2-by-request', machinePrivateKey: machine.privateKey });
    assert.equal(decryptionKey?.length, 32);
  });
});
