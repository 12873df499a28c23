import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { forEachEngine } from '../support/engines.js';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/fake-clock.js';
import { requestLog } from '../support/raw-socket.js';
import { api, rawRequest, startServe, type ServeProcess } from '../support/serve.js';

forEachEngine('backups through the daemon', (fixture) => {
  let serve: ServeProcess;
  let token: string;
  let backupDir: string;
  let license: { id: string; key: string };
  let databaseUrl: string;
  const call = (method: string, route: string, options: Parameters<typeof api>[3] = {}) => api(serve.url, method, route, { token, ...options });

  before(async () => {
    const url = await fixture.freshUrl();
    databaseUrl = url;
    backupDir = path.join(mkdtempSync(path.join(tmpdir(), 'license-api-backups-')), 'backups');
    serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: backupDir, LICENSE_BACKUP_ENCRYPTION_KEY: 'ef'.repeat(32), LICENSE_CLIENT_RATE_LIMIT: '0' });
    token = serve.token!;
    const customer = (await call('POST', '/api/customers', { body: { name: 'Restored Inc.' } })).body;
    license = (await call('POST', '/api/licenses', { body: { customer_id: customer.id, type: 'time_based', valid_from: '2025-01-01', valid_until: '2099-01-01' } })).body;
  });
  after(async () => {
    await serve?.stop();
  });

  it('creates a backup, lists it with the scheduler state, downloads exactly its bytes, and validates it', async () => {
    const created = await call('POST', '/api/backups');
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.trigger, 'manual');
    assert.equal(created.body.encrypted, true);
    const listed = (await call('GET', '/api/backups')).body;
    assert.equal(listed.backups[0].backup_id, created.body.backup_id);
    assert.equal(typeof listed.scheduler.enabled, 'boolean');
    const download = await fetch(`${serve.url}/api/backups/${created.body.backup_id}/download`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(download.status, 200);
    const bytes = Buffer.from(await download.arrayBuffer());
    assert.deepEqual(bytes, readFileSync(path.join(backupDir, created.body.file)));
    assert.equal(download.headers.get('content-length'), String(bytes.length));
    assert.equal(download.headers.get('content-disposition'), `attachment; filename="${created.body.file}"`);
    const validated = await call('POST', `/api/backups/${created.body.backup_id}/validate`);
    assert.equal(validated.status, 200, validated.text);
    assert.equal(validated.body.valid, true);
    assert.equal(validated.body.file, undefined, 'no server path in the answer');
  });

  it('answers 404 for an id that is not a listed backup, ../ tricks included', async () => {
    for (const id of ['20991231T000000000Z-abcdef', 'nope', '..%2F..%2Fetc%2Fpasswd']) {
      const result = await call('GET', `/api/backups/${id}/download`);
      assert.equal(result.status, 404, id);
      assert.equal(result.body.error.code, 'BACKUP_NOT_FOUND');
    }
    // Dot segments are refused before any route is matched (docs/http-api.md, "Ids in paths").
    const raw = await rawRequest(serve.url, 'GET', '/api/backups/../../etc/passwd/download', { headers: { authorization: `Bearer ${token}` } });
    assert.equal(raw.status, 400);
    assert.equal(raw.body.error.code, 'INVALID_ID');
  });

  it('refuses a restore with no body, no confirm field or another id as RESTORE_NOT_CONFIRMED, and restores nothing', async () => {
    const id = (await call('GET', '/api/backups')).body.backups[0].backup_id;
    const restoredBefore = (await call('GET', '/api/audit?action=backup.restored')).body.length;
    const refusals = [
      await call('POST', `/api/backups/${id}/restore`),
      await call('POST', `/api/backups/${id}/restore`, { raw: '', headers: { 'content-type': 'application/json' } }),
      await call('POST', `/api/backups/${id}/restore`, { body: {} }),
      await call('POST', `/api/backups/${id}/restore`, { body: { confirm: '' } }),
      await call('POST', `/api/backups/${id}/restore`, { body: { confirm: null } }),
      await call('POST', `/api/backups/${id}/restore`, { body: { confirm: '20991231T000000000Z-abcdef' } }),
    ];
    for (const refusal of refusals) {
      assert.equal(refusal.status, 400, refusal.text);
      assert.equal(refusal.body.error.code, 'RESTORE_NOT_CONFIRMED', refusal.text);
    }
    const unknown = await call('POST', `/api/backups/${id}/restore`, { body: { confirm: id, confirmed: true } });
    assert.equal(unknown.body.error.code, 'INVALID_INPUT', 'a misspelt member is still refused as such');
    assert.equal((await call('GET', '/api/audit?action=backup.restored')).body.length, restoredBefore, 'nothing was restored');
  });

  it('never runs two backups at once: concurrent creates are 201 or 409, never 500', async () => {
    const results = await Promise.all([call('POST', '/api/backups'), call('POST', '/api/backups'), call('POST', '/api/backups')]);
    const statuses = results.map((r) => r.status);
    assert.ok(statuses.includes(201), String(statuses));
    assert.ok(statuses.every((status) => status === 201 || status === 409), String(statuses));
    for (const result of results.filter((r) => r.status === 409)) assert.equal(result.body.error.code, 'BACKUP_IN_PROGRESS');
  });

  it('restores while serving a steady load: every answer is the old state, the new one, or 503, never a 500 or a mix', async () => {
    const backup = (await call('POST', '/api/backups')).body;
    await call('POST', `/api/licenses/${license.id}/deactivate`);
    const ask = () => api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: 'h', version: '1' } });
    assert.equal((await ask()).body.reason, 'LICENSE_INACTIVE');
    let running = true;
    const seen = { old: 0, new: 0, unavailable: 0 };
    let restored = false;
    const load = async () => {
      while (running) {
        const answer = await ask();
        if (answer.status === 503) {
          assert.equal(answer.body.error.code, 'RESTORE_IN_PROGRESS');
          assert.ok(Number(answer.headers.get('retry-after')) > 0);
          seen.unavailable += 1;
        } else {
          assert.equal(answer.status, 200, answer.text);
          if (answer.body.valid) seen.new += 1;
          else {
            assert.equal(answer.body.reason, 'LICENSE_INACTIVE', 'the old state, whole');
            assert.ok(!restored, 'no old answer after the restore finished');
            seen.old += 1;
          }
        }
      }
    };
    const loads = Array.from({ length: 4 }, load);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // keep_revocations false: the license deactivated after the backup comes back active, as
    // the backup has it, so that old and new answers differ (by default it stays deactivated).
    const restore = await call('POST', `/api/backups/${backup.backup_id}/restore`, { body: { confirm: backup.backup_id, keep_revocations: false } });
    restored = true;
    await new Promise((resolve) => setTimeout(resolve, 200));
    running = false;
    await Promise.all(loads);
    assert.equal(restore.status, 200, restore.text);
    assert.equal(restore.body.backup_id, backup.backup_id);
    assert.ok(restore.body.pre_restore_backup_id);
    assert.ok(seen.old > 0 && seen.new > 0, JSON.stringify(seen));
    assert.equal((await call('GET', `/api/licenses/${license.id}`)).body.active, true, 'the license is back as it was at the backup');
    assert.ok(!/"status":5\d\d,/.test(serve.stderr().replace(/"status":503,/g, '')), 'no 5xx but the 503s of the restore window');
    const actions = (await call('GET', '/api/audit?limit=5')).body.map((e: { action: string }) => e.action);
    assert.ok(actions.includes('backup.restored'));
  });

  it('audits every download, validate and restore with the acting token, and logs the actor but never the token', async () => {
    const issued = await runCli(['token', 'create', '--name', 'ops-alice', '--json'], { env: { LICENSE_DATABASE_URL: databaseUrl } });
    assert.equal(issued.code, 0, issued.stderr);
    const alice = issued.json().token as string;
    const asAlice = (method: string, route: string, options: Parameters<typeof api>[3] = {}) => api(serve.url, method, route, { ...options, token: alice });
    const backup = (await asAlice('POST', '/api/backups')).body;
    const id = backup.backup_id as string;
    const download = await fetch(`${serve.url}/api/backups/${id}/download`, { headers: { authorization: `Bearer ${alice}`, 'x-request-id': 'alice-download' } });
    assert.equal(download.status, 200);
    await download.arrayBuffer();
    assert.equal((await asAlice('POST', `/api/backups/${id}/validate`)).status, 200);
    const entries = (await asAlice('GET', '/api/audit?actor=token:ops-alice')).body as Array<{ action: string; entity_id: string; details: Record<string, unknown> }>;
    const downloaded = entries.find((entry) => entry.action === 'backup.downloaded');
    assert.ok(downloaded, JSON.stringify(entries));
    assert.equal(downloaded.entity_id, id);
    assert.equal(downloaded.details.size, backup.size);
    const validated = entries.find((entry) => entry.action === 'backup.validated');
    assert.ok(validated, JSON.stringify(entries));
    assert.equal(validated.details.valid, true);

    const restored = await asAlice('POST', `/api/backups/${id}/restore`, { body: { confirm: id } });
    assert.equal(restored.status, 200, restored.text);
    const after = (await asAlice('GET', '/api/audit?action=backup.restored&limit=1')).body;
    assert.equal(after[0].actor, 'token:ops-alice');
    assert.equal(after[0].entity_id, id);

    await api(serve.url, 'GET', '/healthz', { headers: { 'x-request-id': 'public-health' } });
    await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: 'h', version: '1' }, headers: { 'x-request-id': 'client-validate' } });
    // The log reaches us through a pipe, possibly after the answer.
    await eventually(() => ['public-health', 'client-validate'].every((id) => serve.stderr().includes(`"request_id":"${id}"`)), 'the lines are logged');
    const log = requestLog(serve.stderr());
    const line = (requestId: string) => log.find((entry) => entry.request_id === requestId);
    assert.equal(line('alice-download')?.actor, 'token:ops-alice');
    assert.equal(line('alice-download')?.route, 'GET /api/backups/:backup_id/download');
    for (const entry of log.filter((e) => /^(GET|POST) \/api\/backups/.test(e.route) && e.status !== 401)) assert.match(entry.actor, /^token:/, JSON.stringify(entry));
    assert.ok(line('public-health'), 'the public request is logged');
    assert.equal(line('public-health')!.actor, undefined, 'public routes have no actor');
    assert.match(line('client-validate')!.actor, /^client:/);
    assert.ok(!serve.stderr().includes(alice) && !serve.stderr().includes(token), 'no token secret in the log');
    assert.ok(!serve.stderr().includes(alice.slice(5, 20)), 'not even part of it');
  });

  it('audits a validate that fails, with its code', async () => {
    const backup = (await call('POST', '/api/backups')).body;
    const file = path.join(backupDir, backup.file);
    const bytes = readFileSync(file);
    const damaged = Buffer.from(bytes);
    damaged[bytes.length - 5] = damaged[bytes.length - 5]! ^ 1;
    writeFileSync(file, damaged);
    try {
      const result = await call('POST', `/api/backups/${backup.backup_id}/validate`);
      assert.equal(result.status, 422, result.text);
      const [entry] = (await call('GET', `/api/audit?action=backup.validated&entity_id=${backup.backup_id}`)).body;
      assert.equal(entry.actor, 'token:bootstrap');
      assert.deepEqual(entry.details, { valid: false, code: result.body.error.code });
      const refused = await call('POST', `/api/backups/${backup.backup_id}/restore`, { body: { confirm: backup.backup_id } });
      assert.equal(refused.status, 422);
      const [failed] = (await call('GET', `/api/audit?action=backup.restore_failed&entity_id=${backup.backup_id}`)).body;
      assert.equal(failed.actor, 'token:bootstrap');
      assert.equal(failed.details.code, refused.body.error.code);
    } finally {
      writeFileSync(file, bytes);
    }
  });

  it('keeps serving the old state when a restore fails', async () => {
    const backup = (await call('POST', '/api/backups')).body;
    const file = path.join(backupDir, backup.file);
    const bytes = readFileSync(file);
    const damaged = Buffer.from(bytes);
    damaged[bytes.length - 5] = damaged[bytes.length - 5]! ^ 1;
    const { writeFileSync } = await import('node:fs');
    writeFileSync(file, damaged);
    const before = (await call('GET', '/api/customers')).body;
    const result = await call('POST', `/api/backups/${backup.backup_id}/restore`, { body: { confirm: backup.backup_id } });
    assert.equal(result.status, 422, result.text);
    assert.equal(result.body.error.code, 'BACKUP_CORRUPT');
    assert.deepEqual((await call('GET', '/api/customers')).body, before);
    assert.equal((await api(serve.url, 'GET', '/readyz')).status, 200);
    writeFileSync(file, bytes);
  });

  it('names what an interrupted create left in GET /api/backups, changing nothing', async () => {
    // Scratch databases are server-wide: another test run sharing the server may have left some.
    const own = (warnings: Array<{ kind: string }>) => warnings.filter((warning) => warning.kind !== 'scratch-database');
    const listed = (await call('GET', '/api/backups')).body;
    assert.deepEqual(own(listed.warnings), []);
    // An archive without its index, as a create killed between its rename and its index leaves it.
    const stray = '20200101T000000000Z-abcdef.backup.tar.gz.enc';
    writeFileSync(path.join(backupDir, stray), readFileSync(path.join(backupDir, listed.backups[0].file)));
    try {
      const after = (await call('GET', '/api/backups')).body;
      assert.deepEqual(after.backups, listed.backups);
      assert.deepEqual(own(after.warnings), [{
        kind: 'unlisted-archive',
        name: stray,
        message: `unlisted archive ${stray}: no index (an interrupted backup create); the next backup create or prune lists it if it verifies, or removes it if damaged`,
      }]);
    } finally {
      rmSync(path.join(backupDir, stray));
    }
  });
});

describe('the backup schedule in a running daemon', () => {
  it('catches a missed backup up at start and reports the schedule in GET /api/backups', async () => {
    const work = mkdtempSync(path.join(tmpdir(), 'license-serve-schedule-'));
    const serve = await startServe({
      LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite'),
      LICENSE_BACKUP_PATH: path.join(work, 'backups'),
      LICENSE_BACKUP_ENABLED: 'true',
      LICENSE_BACKUP_SCHEDULE: '0 3 * * *',
    });
    try {
      const { eventually } = await import('../support/fake-clock.js');
      let listed: { backups: Array<{ trigger: string }>; scheduler: { enabled: boolean; schedule: string; next_run: string; last_run: { status: string } | null } } | undefined;
      await eventually(async () => {
        listed = (await api(serve.url, 'GET', '/api/backups', { token: serve.token })).body;
        return listed!.backups.length === 1 && listed!.scheduler.last_run?.status === 'succeeded';
      }, 'the catch-up backup is listed');
      assert.equal(listed!.backups[0]!.trigger, 'scheduled');
      assert.equal(listed!.scheduler.enabled, true);
      assert.equal(listed!.scheduler.schedule, '0 3 * * *');
      assert.ok(Date.parse(listed!.scheduler.next_run) > Date.now());
    } finally {
      await serve.stop();
      rmSync(work, { recursive: true, force: true });
    }
    const bad = await import('../support/cli.js').then(({ runCli }) => runCli(['serve', '--port', '0'], { env: { LICENSE_DATA_DIR: path.join(tmpdir(), 'never-used'), LICENSE_BACKUP_SCHEDULE: '0 25 * * *' } }));
    assert.equal(bad.code, 3);
    assert.match(bad.stderr, /backup\.schedule \(from env LICENSE_BACKUP_SCHEDULE\) is not a valid cron expression/);
  });
});
