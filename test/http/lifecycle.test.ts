import assert from 'node:assert/strict';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/** The license lifecycle over HTTP, against real serve processes on each engine. */
forEachEngine('license lifecycle over HTTP', (fixture) => {
  let serve: ServeProcess;
  let second: ServeProcess;
  let databaseUrl: string;
  let admin: string;
  const env = () => ({ LICENSE_DATABASE_URL: databaseUrl, LICENSE_CLIENT_RATE_LIMIT: '0' });
  const call = (method: string, route: string, body?: unknown, token = admin, base = serve.url) => api(base, method, route, { token, body });
  const validate = (key: string, hardwareId: string, base = serve.url) =>
    api(base, 'POST', '/api/v1/validate', { body: { license_key: key, hardware_id: hardwareId, version: '2.1.0' } });
  const newToken = async (name: string, scopes: string[], extra: string[] = []) =>
    ok(await runCli(['token', 'create', '--name', name, ...scopes.flatMap((s) => ['--scope', s]), ...extra, '--json'], { env: { LICENSE_DATABASE_URL: databaseUrl } })).json().token as string;
  let customerId: string;

  before(async () => {
    databaseUrl = await fixture.freshUrl();
    serve = await startServe(env());
    second = await startServe(env());
    admin = serve.token!;
    customerId = (await call('POST', '/api/customers', { name: 'Umbrella' })).body.id;
    assert.equal((await call('POST', '/api/entitlements', { code: 'api.calls', name: 'API calls' })).status, 201);
  });
  after(async () => {
    for (const process of [serve, second]) if (process) assert.equal((await process.stop()).code, 0);
  });

  it('never admit more machines than the limit when 240 first validations race on two daemons', async function () {
    this.timeout(120_000);
    const limit = 25;
    const license = (await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: limit, with_decryption_key: true })).body;
    const answers = await Promise.all(
      Array.from({ length: 240 }, (_, i) => validate(license.key, `RACE-${i}`, i % 2 === 0 ? serve.url : second.url)),
    );
    assert.ok(answers.every((answer) => answer.status === 200), answers.find((a) => a.status !== 200)?.text);
    const admitted = answers.filter((answer) => answer.body.valid);
    const refused = answers.filter((answer) => !answer.body.valid);
    assert.equal(admitted.length, limit, `admitted ${admitted.length} of a limit of ${limit}`);
    assert.ok(refused.every((answer) => answer.body.reason === 'MACHINE_LIMIT_EXCEEDED' && !('encrypted_key' in answer.body)));
    assert.ok(admitted.every((answer) => typeof answer.body.encrypted_key === 'string'));
    const machines = (await call('GET', `/api/machines?license_id=${license.id}&limit=1000`)).body;
    assert.equal(machines.length, limit);
    assert.equal((await call('GET', `/api/licenses/${license.id}`)).body.machines_in_use, limit);
  });

  it('list, show, deactivate and activate machines through the admin API', async () => {
    const license = (await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: 1 })).body;
    assert.equal((await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: 'DESK-1', version: '3.0', machine_name: 'Front desk' } })).body.valid, true);
    const [machine] = (await call('GET', `/api/machines?license_id=${license.id}`)).body;
    assert.equal(machine.name, 'Front desk');
    assert.equal(machine.client_version, '3.0');
    assert.deepEqual((await call('GET', `/api/machines/${machine.id}`)).body, machine);
    const deactivated = (await call('POST', `/api/machines/${machine.id}/deactivate`, {})).body;
    assert.equal(deactivated.machine.active, false);
    assert.match(deactivated.warnings[0], /seat stays taken/);
    assert.equal((await validate(license.key, 'DESK-1')).body.reason, 'MACHINE_DEACTIVATED');
    const reactivated = await call('POST', `/api/machines/${machine.id}/activate`, {});
    assert.equal(reactivated.status, 200, reactivated.text);
    assert.equal((await validate(license.key, 'DESK-1')).body.valid, true);
    assert.equal((await call('GET', '/api/machines/3f1f2a9e-0000-4000-8000-000000000000')).body.error.code, 'MACHINE_NOT_FOUND');
  });

  it('changes and renews a license in place with PATCH and /renew, seen by the next validation', async () => {
    const license = (await call('POST', '/api/licenses', {
      customer_id: customerId, type: 'hybrid', valid_until: '2090-01-01', entitlements: [{ code: 'api.calls', usage_limit: 10 }], metadata: { order: 'PO-7' },
    })).body;
    assert.deepEqual(license.metadata, { order: 'PO-7' });
    const patched = await call('PATCH', `/api/licenses/${license.id}`, { valid_until: '2091-06-30', set_limits: [{ code: 'api.calls', usage_limit: 20 }], max_machines: 4 });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(Object.keys(patched.body.changes).sort(), ['entitlement api.calls', 'max_machines', 'valid_until']);
    const answer = (await validate(license.key, 'P-1')).body;
    assert.equal(answer.valid_until, '2091-07-01T00:00:00.000Z', 'a valid_until date runs through that day: the next day\'s 00:00:00, exclusive');
    assert.deepEqual(answer.entitlements, [{ code: 'api.calls', name: 'API calls', usage_limit: 20 }]);
    const renewed = await call('POST', `/api/licenses/${license.id}/renew`, { by: '365d' });
    assert.equal(renewed.status, 200, renewed.text);
    assert.equal(renewed.body.license.valid_until, new Date(Date.parse('2091-07-01T00:00:00Z') + 365 * 86_400_000).toISOString());
    for (const [body, code] of [[{}, 'INVALID_INPUT'], [{ by: '1y', until: '2099-01-01' }, 'INVALID_INPUT'], [{ until: '2091-01-01' }, 'INVALID_VALIDITY']] as const) {
      assert.equal((await call('POST', `/api/licenses/${license.id}/renew`, body)).body.error.code, code);
    }
    const bad = await call('PATCH', `/api/licenses/${license.id}`, { max_machines: 0, valid_until: '2099-01-01' });
    assert.equal(bad.status, 400);
    assert.equal((await call('GET', `/api/licenses/${license.id}`)).body.max_machines, 4, 'a refused PATCH changed nothing');
    const usage = await api(serve.url, 'POST', '/api/v1/usage', {
      body: { license_key: license.key, hardware_id: 'P-1', entitlement_code: 'api.calls', quantity: 3, occurred_at: new Date().toISOString(), idempotency_key: 'u-1' },
    });
    assert.equal(usage.status, 201, usage.text);
    const records = (await call('GET', `/api/licenses/${license.id}/usage`)).body;
    assert.deepEqual(records.map((r: any) => [r.idempotency_key, r.quantity, r.remaining]), [['u-1', 3, 17]]);
    const shown = (await call('GET', `/api/licenses/${license.id}`)).body;
    assert.deepEqual(shown.entitlements[0], { code: 'api.calls', name: 'API calls', usage_limit: 20, used: 3, remaining: 17 });
    assert.equal(shown.machines_in_use, 1);
    const summary = (await call('GET', `/api/customers/${customerId}`)).body;
    assert.ok(summary.licenses >= 3 && summary.machines_in_use >= 27, JSON.stringify(summary));
  });

  it('release a floating seat through POST /api/v1/release: free when its grace token ends, as the answer says', async () => {
    const license = (await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: 1, floating: true, lease_hours: 1 })).body;
    const first = (await validate(license.key, 'F-1')).body;
    assert.equal(first.valid, true);
    assert.equal(first.grace_expires_at, first.lease_expires_at);
    assert.equal((await validate(license.key, 'F-2', second.url)).body.reason, 'MACHINE_LIMIT_EXCEEDED');
    const released = await api(second.url, 'POST', '/api/v1/release', { body: { license_key: license.key, hardware_id: 'F-1' } });
    assert.equal(released.status, 200, released.text);
    assert.deepEqual([released.body.released, released.body.seat_free_at], [true, first.grace_expires_at]);
    assert.equal((await validate(license.key, 'F-2')).body.reason, 'MACHINE_LIMIT_EXCEEDED', 'F-1\'s token still works offline');
    assert.equal((await api(serve.url, 'POST', '/api/v1/release', { body: { license_key: 'NOPE', hardware_id: 'F-1' } })).body.error.code, 'LICENSE_NOT_FOUND');
  });

  it('free a seat held by a lost offline file through POST /api/machines/{id}/release, audited', async () => {
    const license = (await call('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: 1, floating: true, lease_hours: 1 })).body;
    const file = await call('POST', `/api/licenses/${license.id}/checkout`, { ttl_days: 30, hardware_id: 'LOST-1' });
    assert.equal(file.status, 200, file.text);
    assert.equal((await validate(license.key, 'LOST-2')).body.reason, 'MACHINE_LIMIT_EXCEEDED');
    const [machine] = (await call('GET', `/api/machines?license_id=${license.id}`)).body;
    for (const body of [{}, { lost_file: false }, { lost_file: 'yes' }, { lost_file: true, reason: 7 }, { lost_file: true, extra: 1 }]) {
      const refused = await call('POST', `/api/machines/${machine.id}/release`, body);
      assert.deepEqual([refused.status, refused.body.error.code], [400, 'INVALID_INPUT'], JSON.stringify(body));
    }
    const released = await call('POST', `/api/machines/${machine.id}/release`, { lost_file: true, reason: 'courier lost the stick' }, admin, second.url);
    assert.equal(released.status, 200, released.text);
    assert.deepEqual([released.body.machine.offline_until, released.body.machine.holds_seat, released.body.warnings], [null, false, []]);
    assert.equal((await validate(license.key, 'LOST-2')).body.valid, true, 'the seat went to another machine');
    const [entry] = (await call('GET', `/api/audit?action=machine.offline_files_released&entity_id=${machine.id}`)).body;
    const { actor } = (await call('GET', '/api/whoami')).body;
    assert.deepEqual([entry.actor, entry.details.reason, entry.details.offline_until], [actor, 'courier lost the stick', machine.offline_until]);
    const again = (await call('POST', `/api/machines/${machine.id}/release`, { lost_file: true })).body;
    assert.deepEqual(again.warnings, ['no offline file of this machine is valid; nothing changed']);
  });

  it('scope admin tokens: 403 TOKEN_SCOPE beyond the scope, 401 TOKEN_EXPIRED after expiry, names never reused', async () => {
    const reader = await newToken(`reader-${fixture.engine}`, ['read']);
    const provisioner = await newToken(`provisioner-${fixture.engine}`, ['read', 'licenses']);
    const backups = await newToken(`backups-${fixture.engine}`, ['backups']);
    const restorer = await newToken(`restorer-${fixture.engine}`, ['restore']);
    const whoami = (await call('GET', '/api/whoami', undefined, reader)).body;
    assert.deepEqual([whoami.actor, whoami.scopes, whoami.routes.includes('GET /api/licenses'), whoami.routes.includes('POST /api/licenses')], [`token:reader-${fixture.engine}`, ['read'], true, false]);
    assert.equal((await call('GET', '/api/licenses', undefined, reader)).status, 200);
    const denied = await call('POST', '/api/customers', { name: 'Nope' }, reader);
    assert.equal(denied.status, 403);
    assert.equal(denied.body.error.code, 'TOKEN_SCOPE');
    assert.equal((await call('POST', '/api/customers', { name: 'Provisioned' }, provisioner)).status, 201);
    assert.equal((await call('GET', '/api/backups', undefined, provisioner)).body.error.code, 'TOKEN_SCOPE');
    assert.equal((await call('GET', '/api/backups', undefined, backups)).status, 200);
    assert.equal((await call('GET', '/api/licenses', undefined, backups)).body.error.code, 'TOKEN_SCOPE');
    assert.equal((await call('POST', '/api/backups/20990101T000000Z-manual/restore', { confirm: true }, backups)).body.error.code, 'TOKEN_SCOPE');
    const restore = await call('POST', '/api/backups/20990101T000000Z-manual/restore', { confirm: true }, restorer);
    assert.ok(['BACKUP_NOT_FOUND', 'RESTORE_NOT_CONFIRMED'].includes(restore.body.error.code), `the restore scope reaches the restore route: ${restore.text}`);
    assert.equal((await call('GET', '/api/backups', undefined, restorer)).body.error.code, 'TOKEN_SCOPE');

    const expiring = await newToken(`expiring-${fixture.engine}`, ['read'], ['--expires-in', '1h']);
    assert.equal((await call('GET', '/api/licenses', undefined, expiring)).status, 200);
    const db = await openDatabase(databaseUrl);
    try {
      await db.execute('UPDATE admin_tokens SET expires_at = ? WHERE name = ?', [new Date(Date.now() - 1000).toISOString(), `expiring-${fixture.engine}`]);
    } finally {
      await db.close();
    }
    const expired = await call('GET', '/api/licenses', undefined, expiring);
    assert.equal(expired.status, 401);
    assert.equal(expired.body.error.code, 'TOKEN_EXPIRED');

    ok(await runCli(['token', 'revoke', `reader-${fixture.engine}`], { env: { LICENSE_DATABASE_URL: databaseUrl } }));
    const again = await runCli(['token', 'create', '--name', `reader-${fixture.engine}`], { env: { LICENSE_DATABASE_URL: databaseUrl } });
    assert.equal(again.code, 5, again.stderr);
    assert.match(again.stderr, /TOKEN_NAME_EXISTS/);
    const unknown = await runCli(['token', 'create', '--name', 'x', '--scope', 'superuser'], { env: { LICENSE_DATABASE_URL: databaseUrl } });
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /INVALID_SCOPE/);
  });
});
