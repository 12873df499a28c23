import assert from 'node:assert/strict';
import { decodeLicenseFile } from '../../src/lib/offline/format.js';
import { activationRequestFor, uncheckedRequestText } from '../support/activation-request.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/** POST /api/licenses/{id}/checkout with an activation request in the body, and each refusal. */
forEachEngine('the API\'s checkout of an activation request', (fixture) => {
  let serve: ServeProcess;
  let license: { id: string; key: string };
  let other: { id: string; key: string };
  const call = (method: string, route: string, body?: unknown) => api(serve.url, method, route, { token: serve.token!, body });
  const checkout = (id: string, body: unknown) => call('POST', `/api/licenses/${id}/checkout`, body);
  const refused = async (answer: ReturnType<typeof call>, status: number, code: string, message?: RegExp) => {
    const { status: got, body, text } = await answer;
    assert.equal(got, status, text);
    assert.equal(body.error.code, code, text);
    if (message) assert.match(body.error.message, message);
  };

  before(async function () {
    this.timeout(60_000);
    // A window of 3 days (offline.request_window_days) in place of the default 7: the daemon passes its setting on.
    serve = await startServe({ LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_CLIENT_RATE_LIMIT: '0', LICENSE_OFFLINE_REQUEST_WINDOW_DAYS: '3' });
    const customer = (await call('POST', '/api/customers', { name: 'Air-gapped Works' })).body;
    license = (await call('POST', '/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: '2099-12-31', max_machines: 1 })).body;
    other = (await call('POST', '/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: '2099-12-31' })).body;
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
  });

  it('answers a version 2 file bound to the request\'s machine with its nonce; the same request again, for the same seat', async () => {
    const { text, request } = activationRequestFor(license.key, 'hw2-api');
    const answer = await checkout(license.id, { ttl_days: 30, request: text });
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(Object.keys(answer.body).sort(), ['filename', 'license_file', 'valid_until']);
    const { payload } = decodeLicenseFile(answer.body.license_file);
    assert.deepEqual([payload.version, payload.hardware_id, payload.request_nonce], [2, 'hw2-api', request.nonce]);
    assert.equal((await checkout(license.id, { ttl_days: 30, request: text })).status, 200, 'a redo of the same request');
    const machines = (await call('GET', `/api/machines?license_id=${license.id}`)).body;
    assert.deepEqual(machines.map((m: { hardware_id: string }) => m.hardware_id), ['hw2-api']);
    const entries = (await call('GET', '/api/audit?action=license.checked_out')).body as Array<{ details: Record<string, unknown> }>;
    assert.equal(entries.filter((entry) => entry.details.request_nonce === request.nonce).length, 2);
  });

  it('refuses: malformed 400, both request and hardware_id 400, another license 422, too old (for its window) 422, replayed 409', async () => {
    await refused(checkout(other.id, { ttl_days: 30, request: 'not a request' }), 400, 'ACTIVATION_REQUEST_MALFORMED', /^activation request is malformed: /);
    await refused(checkout(other.id, { ttl_days: 30, request: { hardware_id: 'x' } }), 400, 'ACTIVATION_REQUEST_MALFORMED', /must be the request file's text, got object/);
    const mine = activationRequestFor(other.key, 'hw2-mine');
    await refused(checkout(other.id, { ttl_days: 30, request: mine.text, hardware_id: 'hw2-mine' }), 400, 'INVALID_INPUT', /not both/);
    await refused(checkout(other.id, { ttl_days: 30, request: activationRequestFor(license.key, 'hw2-x').text }), 422, 'ACTIVATION_REQUEST_WRONG_LICENSE');
    const old = activationRequestFor(other.key, 'hw2-x', { created_at: `${new Date(Date.now() - 4 * 86_400_000).toISOString().slice(0, 19)}Z` });
    await refused(checkout(other.id, { ttl_days: 30, request: old.text }), 422, 'ACTIVATION_REQUEST_EXPIRED', /more than 3 days ago/);
    assert.equal((await checkout(other.id, { ttl_days: 30, request: mine.text })).status, 200);
    const altered = activationRequestFor(other.key, 'hw2-altered', { nonce: mine.request.nonce, created_at: mine.request.created_at });
    await refused(checkout(other.id, { ttl_days: 30, request: altered.text }), 409, 'ACTIVATION_REQUEST_REPLAYED', /already used for another hardware ID/);
    await refused(checkout(other.id, { ttl_days: 30, request: mine.text, extra: 1 }), 400, 'INVALID_INPUT', /unknown field "extra"; expected ttl_days, hardware_id, request/);
  });

  it('refuses the same nonce, hardware ID and date with another machine_key 409 REPLAYED: the machine keeps its key, and its own request still answers', async () => {
    const customer = (await call('POST', '/api/customers', { name: 'Keyed Works' })).body;
    const sealed = (await call('POST', '/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: '2099-12-31', with_decryption_key: true, binding: 'machine-key' })).body;
    const genuine = activationRequestFor(sealed.key, 'hw2-machine-c');
    assert.equal((await checkout(sealed.id, { ttl_days: 30, request: genuine.text })).status, 200);
    const attacker = activationRequestFor(sealed.key, 'hw2-machine-c', { nonce: genuine.request.nonce, created_at: genuine.request.created_at });
    await refused(checkout(sealed.id, { ttl_days: 30, request: attacker.text }), 409, 'ACTIVATION_REQUEST_REPLAYED', /already used by a request with other contents/);
    const machines = (await call('GET', `/api/machines?license_id=${sealed.id}`)).body;
    assert.deepEqual(machines.map((m: { machine_key: string }) => m.machine_key), [genuine.request.machine_key]);
    const again = await checkout(sealed.id, { ttl_days: 30, request: genuine.text });
    assert.equal(again.status, 200, again.text);
    assert.equal(decodeLicenseFile(again.body.license_file).payload.machine_key, genuine.request.machine_key);
  });

  it('refuses a request whose machine_key is an X25519 point of small order 400 ACTIVATION_REQUEST_MALFORMED (it was 500 INTERNAL)', async () => {
    const customer = (await call('POST', '/api/customers', { name: 'Small Order Works' })).body;
    const sealed = (await call('POST', '/api/licenses', { customer_id: customer.id, type: 'time_based', valid_until: '2099-12-31', with_decryption_key: true, binding: 'machine-key' })).body;
    for (const hex of ['00'.repeat(32), `ee${'ff'.repeat(30)}7f`]) {
      const text = uncheckedRequestText({ ...activationRequestFor(sealed.key, 'hw2-small-order').request, machine_key: Buffer.from(hex, 'hex').toString('base64url') });
      await refused(checkout(sealed.id, { ttl_days: 30, request: text }), 400, 'ACTIVATION_REQUEST_MALFORMED', /"machine_key" is an X25519 point of small order/);
    }
  });
});
