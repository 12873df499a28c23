import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from '../support/fake-clock.js';
import { runCli, ok } from '../support/cli.js';
import { startReceiver } from '../support/receiver.js';
import { api, startServe } from '../support/serve.js';
import { createBackup } from '../../src/lib/backup/create.js';
import { listBackups } from '../../src/lib/backup/repository.js';
import { resolveConfig } from '../../src/lib/config/resolve.js';
import { openDatabase } from '../../src/lib/storage/open.js';


describe('notifications from the command line and the daemon', function () {
  this.timeout(60_000);
  let work: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, { env, cwd: work });

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-notifications-'));
    env = { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite'), LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    ok(await cli('init'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('sets, shows, previews and tests the settings; backup create alerts the webhook', async () => {
    const receiver = await startReceiver();
    try {
      writeFileSync(path.join(work, 'n.yaml'), [
        'webhooks:',
        `  - name: ops`,
        `    url: ${receiver.url}`,
        'rules:',
        '  - event: backup.*',
        '    webhook: ops',
        'email_templates:',
        '  - event: backup.failed',
        '    subject: "Backup failed on {{server}}"',
        '    body: "{{error}} (trigger: {{trigger}})"',
        '',
      ].join('\n'));
      const set = ok(await cli('notifications', 'set', '--file', path.join(work, 'n.yaml')));
      const secret = /generated secret for webhook ops \(shown only this once\): (\S+)/.exec(set.stdout)?.[1];
      assert.ok(secret);
      const shown = ok(await cli('notifications', 'show')).stdout;
      assert.match(shown, /secret: "?\[redacted\]"?/);
      assert.ok(!shown.includes(secret!));
      assert.ok(ok(await cli('notifications', 'show', '--reveal-secrets')).stdout.includes(secret!));
      const preview = ok(await cli('notifications', 'preview', '--event', 'backup.failed')).stdout;
      assert.equal(preview.trim(), 'Subject: Backup failed on license-server\n\nno space left on the device (trigger: scheduled)');

      ok(await cli('notifications', 'test', '--webhook', 'ops'));
      assert.equal(JSON.parse(receiver.received[0]!.body).event, 'notification.test');
      const signature = `sha256=${createHmac('sha256', secret!).update(receiver.received[0]!.body).digest('hex')}`;
      assert.equal(receiver.received[0]!.headers['x-license-server-signature'], signature);

      ok(await cli('backup', 'create'));
      const event = JSON.parse(receiver.received[1]!.body);
      assert.equal(event.event, 'backup.succeeded');
      assert.match(event.data.backup_id, /^\d{8}T\d{9}Z-[0-9a-f]{6}$/);
      const audit = ok(await cli('audit', 'list', '--action', 'notifications.updated', '--json')).json();
      assert.equal(audit.length, 1);
      assert.ok(!JSON.stringify(audit).includes(secret!));
    } finally {
      await receiver.close();
    }
  });

  it('the daemon sends license.checked_out, and a hanging webhook slows nothing', async () => {
    const receiver = await startReceiver();
    const hanging = await startReceiver(() => 'hang');
    writeFileSync(path.join(work, 'd.yaml'), JSON.stringify({
      webhooks: [{ name: 'audit', url: receiver.url, secret: 'audit-secret-0123456789' }, { name: 'slow', url: hanging.url, secret: 'slow-secret-0123456789' }],
      rules: [{ event: 'license.checked_out', webhook: 'audit' }, { event: '*', webhook: 'slow' }],
    }));
    ok(await cli('notifications', 'set', '--file', path.join(work, 'd.yaml')));
    const serve = await startServe(env);
    try {
      const token = serve.token ?? ok(await cli('token', 'create', '--name', 'notify-test', '--json')).json().token;
      const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Hooked' } })).body;
      const license = (await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' } })).body;
      const started = Date.now();
      const checkout = await api(serve.url, 'POST', `/api/licenses/${license.id}/checkout`, { token, body: { ttl_days: 3, hardware_id: 'hw-9' } });
      assert.equal(checkout.status, 200);
      assert.ok(Date.now() - started < 1000, 'the checkout did not wait for webhooks');
      await eventually(() => receiver.received.length === 1, 'the event arrived');
      const event = JSON.parse(receiver.received[0]!.body);
      assert.deepEqual([event.event, event.data.license_id, event.data.hardware_id], ['license.checked_out', license.id, 'hw-9']);
      assert.equal(receiver.received[0]!.headers['x-license-server-signature'], `sha256=${createHmac('sha256', 'audit-secret-0123456789').update(receiver.received[0]!.body).digest('hex')}`);
      const stopped = await serve.stop();
      assert.equal(stopped.code, 0);
      assert.ok(stopped.ms < 10_000, 'a webhook still hanging does not hold the shutdown');
    } finally {
      await serve.stop();
      await receiver.close();
      await hanging.close();
    }
  });

  it('backup restore delivers the restored store\'s backup.restored before it exits', async () => {
    const receiver = await startReceiver();
    try {
      writeFileSync(path.join(work, 'r.json'), JSON.stringify({ webhooks: [{ name: 'ops', url: receiver.url, secret: 'restore-secret-0123456789' }], rules: [{ event: 'backup.restored', webhook: 'ops' }] }));
      ok(await cli('notifications', 'set', '--file', path.join(work, 'r.json')));
      const backup = ok(await cli('backup', 'create', '--json')).json();
      const restored = ok(await cli('backup', 'restore', backup.id, '--yes'));
      const events = receiver.received.map((r) => JSON.parse(r.body));
      assert.deepEqual(events.map((event) => [event.event, event.data.backup_id]), [['backup.restored', backup.id]], restored.stderr);
      assert.match(events[0].data.pre_restore_backup_id, /^\d{8}T\d{9}Z-[0-9a-f]{6}$/);
    } finally {
      await receiver.close();
    }
  });

  describe('webhook URLs with credentials, redirects and link-local addresses', () => {
    let dir: string;
    let envHere: Record<string, string>;
    const run = (args: string[], extra: Record<string, string> = {}) => runCli(args, { env: { ...envHere, ...extra }, cwd: dir });
    const SECRETS = ['url-password-1', 'query-secret-1', 'url-password-2', 'query-secret-2', 'location-password', 'location-token'];
    const assertNoSecret = (text: string, where: string) => {
      for (const secret of SECRETS) assert.ok(!text.includes(secret), `${secret} in ${where}:\n${text}`);
    };

    before(async () => {
      dir = mkdtempSync(path.join(tmpdir(), 'license-webhook-urls-'));
      envHere = { LICENSE_DATABASE_URL: path.join(dir, 'data', 'db.sqlite'), LICENSE_BACKUP_PATH: path.join(dir, 'backups') };
      await (await openDatabase(envHere.LICENSE_DATABASE_URL!)).close();
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it('never prints the credentials or query of a webhook URL (set, show, test, errors), keeps them through show and set, and follows no redirect', async () => {
      let location = '';
      const receiver = await startReceiver((_, at) => (at.startsWith('/moved') ? { status: 307, headers: { location } } : 200));
      try {
        location = receiver.url.replace('http://', 'http://locuser:location-password@').replace('/hook', '/elsewhere?token=location-token');
        const creds = `${receiver.url.replace('http://', 'http://hookuser:url-password-1@')}?token=query-secret-1`;
        writeFileSync(path.join(dir, 'urls.json'), JSON.stringify({
          webhooks: [
            { name: 'creds', url: creds, secret: 'creds-secret-0123456789' },
            { name: 'dead', url: 'http://deaduser:url-password-2@127.0.0.1:1/none?token=query-secret-2', secret: 'dead-secret-0123456789' },
            { name: 'moved', url: receiver.url.replace('/hook', '/moved'), secret: 'moved-secret-0123456789' },
          ],
        }));
        const set = ok(await run(['notifications', 'set', '--file', path.join(dir, 'urls.json')]));
        assertNoSecret(set.stdout + set.stderr, 'set');
        assertNoSecret(ok(await run(['notifications', 'set', '--file', path.join(dir, 'urls.json'), '--json'])).stdout, 'set --json');

        const shown = ok(await run(['notifications', 'show'])).stdout;
        assertNoSecret(shown, 'show');
        assert.ok(shown.includes(`url: ${receiver.url.replace('http://', 'http://hookuser:***@')}?***`), shown);
        assertNoSecret(ok(await run(['notifications', 'show', '--json'])).stdout, 'show --json');
        assert.ok(ok(await run(['notifications', 'show', '--reveal-secrets'])).stdout.includes(creds), '--reveal-secrets shows the URL whole');

        // What show printed goes back in unchanged: the stored password and query are kept.
        writeFileSync(path.join(dir, 'shown.yaml'), shown);
        assertNoSecret(ok(await run(['notifications', 'set', '--file', path.join(dir, 'shown.yaml')])).stdout, 'set of the shown file');

        const tested = await run(['notifications', 'test']);
        assert.equal(tested.code, 15, tested.stderr);
        assertNoSecret(tested.stdout + tested.stderr, 'test');
        assert.match(tested.stdout, /^moved\s+no\s+307 \(redirect not followed: http:\/\/locuser:\*\*\*@127\.0\.0\.1:\d+\/elsewhere\?\*\*\*\)$/m);
        assert.match(tested.stdout, /^dead\s+no\s+ECONNREFUSED$/m);
        const json = await run(['notifications', 'test', '--json']);
        assertNoSecret(json.stdout + json.stderr, 'test --json');
        assert.deepEqual(json.json().map((r: { webhook: string; delivered: boolean; status?: number }) => [r.webhook, r.delivered, r.status ?? null]), [['creds', true, 200], ['dead', false, null], ['moved', false, 307]]);

        const authorized = receiver.received.filter((r) => r.path.startsWith('/hook'));
        assert.equal(authorized.length, 2);
        for (const r of authorized) {
          assert.equal(r.headers.authorization, `Basic ${Buffer.from('hookuser:url-password-1').toString('base64')}`);
          assert.equal(r.path, '/hook?token=query-secret-1');
        }
        assert.deepEqual(receiver.received.filter((r) => !r.path.startsWith('/hook')).map((r) => r.path), ['/moved', '/moved'], 'the Location was never visited');
      } finally {
        await receiver.close();
      }
    });

    it('the daemon logs webhook attempts without URL credentials and does not follow a redirect', async () => {
      let location = '';
      const receiver = await startReceiver((_, at) => (at.startsWith('/moved') ? { status: 307, headers: { location } } : 200));
      location = receiver.url.replace('http://', 'http://locuser:location-password@').replace('/hook', '/elsewhere?token=location-token');
      writeFileSync(path.join(dir, 'daemon.json'), JSON.stringify({
        webhooks: [
          { name: 'dead', url: 'http://deaduser:url-password-2@127.0.0.1:1/none?token=query-secret-2', secret: 'dead-secret-0123456789' },
          { name: 'moved', url: receiver.url.replace('/hook', '/moved'), secret: 'moved-secret-0123456789' },
        ],
        rules: [{ event: '*', webhook: 'dead' }, { event: '*', webhook: 'moved' }],
      }));
      ok(await run(['notifications', 'set', '--file', path.join(dir, 'daemon.json')]));
      const serve = await startServe(envHere);
      try {
        const token = serve.token ?? ok(await run(['token', 'create', '--name', 'url-test', '--json'])).json().token;
        const customer = (await api(serve.url, 'POST', '/api/customers', { token, body: { name: 'Redirected' } })).body;
        const license = (await api(serve.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' } })).body;
        assert.equal((await api(serve.url, 'POST', `/api/licenses/${license.id}/checkout`, { token, body: { ttl_days: 3 } })).status, 200);
        const attempts = () => serve.stderr().split('\n').filter((line) => line.includes('"notification attempt failed"')).map((line) => JSON.parse(line));
        await eventually(() => new Set(attempts().map((entry) => entry.webhook)).size === 2, 'both webhooks failed once');
        const moved = attempts().find((entry) => entry.webhook === 'moved');
        assert.equal(moved.status, 307);
        assert.match(moved.location, /^http:\/\/locuser:\*\*\*@127\.0\.0\.1:\d+\/elsewhere\?\*\*\*$/);
        assert.equal(attempts().find((entry) => entry.webhook === 'dead').error, 'ECONNREFUSED');
        assertNoSecret(serve.stdout() + serve.stderr(), 'the daemon log');
        assert.ok(receiver.received.every((r) => r.path === '/moved'), 'the Location was never visited');
      } finally {
        await serve.stop();
        await receiver.close();
      }
    });

    it('delivers over HTTPS to a host name resolved by the system, and only with a certificate it trusts', async () => {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
        '-addext', 'subjectAltName=DNS:localhost', '-keyout', path.join(dir, 'tls-key.pem'), '-out', path.join(dir, 'tls-cert.pem')], { stdio: 'ignore' });
      const bodies: string[] = [];
      const server = createHttpsServer({ key: readFileSync(path.join(dir, 'tls-key.pem')), cert: readFileSync(path.join(dir, 'tls-cert.pem')) }, (request, response) => {
        let body = '';
        request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        request.on('end', () => {
          bodies.push(body);
          response.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      try {
        const url = `https://localhost:${(server.address() as AddressInfo).port}/hook`;
        writeFileSync(path.join(dir, 'tls.json'), JSON.stringify({ webhooks: [{ name: 'tls', url, secret: 'tls-secret-0123456789' }] }));
        ok(await run(['notifications', 'set', '--file', path.join(dir, 'tls.json')]));
        const untrusted = await run(['notifications', 'test', '--json']);
        assert.equal(untrusted.code, 15);
        assert.deepEqual(untrusted.json().map((r: { delivered: boolean; error?: string }) => [r.delivered, r.error]), [[false, 'DEPTH_ZERO_SELF_SIGNED_CERT']]);
        assert.equal(bodies.length, 0);
        const trusted = ok(await run(['notifications', 'test', '--json'], { NODE_EXTRA_CA_CERTS: path.join(dir, 'tls-cert.pem') })).json();
        assert.deepEqual(trusted.map((r: { delivered: boolean; status?: number }) => [r.delivered, r.status]), [[true, 204]]);
        assert.equal(JSON.parse(bodies[0]!).event, 'notification.test');
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('refuses a link-local webhook URL at set time with WEBHOOK_ADDRESS_REFUSED unless notifications.allow_link_local is on', async () => {
      ok(await run(['notifications', 'set', '--file', path.join(dir, 'urls.json')]));
      for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://[fe80::1]/hook', 'http://[::ffff:169.254.169.254]/']) {
        writeFileSync(path.join(dir, 'meta.json'), JSON.stringify({ webhooks: [{ name: 'metadata', url }] }));
        const refused = await run(['notifications', 'set', '--file', path.join(dir, 'meta.json')]);
        assert.equal(refused.code, 6, `${url}: ${refused.stderr}`);
        assert.match(refused.stderr, /^Error: notification settings: webhooks\[0\]\.url points at \S+, a link-local address .*\(WEBHOOK_ADDRESS_REFUSED\)$/m);
        assert.match(refused.stderr, /^Try: .*notifications\.allow_link_local/m);
        const json = await run(['notifications', 'set', '--file', path.join(dir, 'meta.json'), '--json']);
        assert.equal(json.json().error.code, 'WEBHOOK_ADDRESS_REFUSED');
      }
      const kept = ok(await run(['notifications', 'show', '--json'])).json();
      assert.deepEqual(kept.webhooks.map((hook: { name: string }) => hook.name), ['creds', 'dead', 'moved'], 'nothing changed');
      ok(await run(['notifications', 'set', '--file', path.join(dir, 'meta.json')], { LICENSE_NOTIFICATIONS_ALLOW_LINK_LOCAL: 'true' }));
      assert.deepEqual(ok(await run(['notifications', 'show', '--json'])).json().webhooks.map((hook: { url: string }) => hook.url), ['http://[::ffff:a9fe:a9fe]/']);
    });
  });

  describe('a webhook that fails or is down', () => {
    let dir: string;
    let envHere: Record<string, string>;
    let down: string;
    let failing: Awaited<ReturnType<typeof startReceiver>>;
    const run = (args: string[]) => runCli(args, { env: envHere, cwd: dir });

    before(async () => {
      dir = mkdtempSync(path.join(tmpdir(), 'license-webhook-down-'));
      envHere = {
        LICENSE_DATABASE_URL: path.join(dir, 'data', 'db.sqlite'),
        LICENSE_BACKUP_PATH: path.join(dir, 'backups'),
        // Retention that removes every backup older than a day but the newest.
        LICENSE_BACKUP_RETENTION_DAYS: '1',
        LICENSE_BACKUP_KEEP_DAILY: '0',
        LICENSE_BACKUP_KEEP_WEEKLY: '0',
        LICENSE_BACKUP_KEEP_MONTHLY: '0',
      };
      ok(await run(['init']));
      const closed = await startReceiver();
      down = closed.url;
      await closed.close();
      failing = await startReceiver(() => 500);
      writeFileSync(path.join(dir, 'hooks.json'), JSON.stringify({
        webhooks: [{ name: 'down', url: down, secret: 'down-secret-0123456789' }, { name: 'failing', url: failing.url, secret: 'failing-secret-0123456789' }],
        rules: [{ event: 'backup.*', webhook: 'down' }, { event: 'backup.*', webhook: 'failing' }],
      }));
      ok(await run(['notifications', 'set', '--file', path.join(dir, 'hooks.json')]));
    });
    after(async () => {
      await failing?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('leaves backup create its exit code, its one summary line and its retention, with one warning per failed delivery', async () => {
      const config = await resolveConfig({ env: envHere, cwd: dir });
      const db = await openDatabase(envHere.LICENSE_DATABASE_URL!);
      const old = await createBackup({ db, config, trigger: 'manual', toolVersion: 'test', context: { actor: 'test', clock: () => new Date(Date.now() - 3 * 86_400_000) } })
        .finally(() => db.close());

      const created = await run(['backup', 'create']);
      assert.equal(created.code, 0, created.stderr);
      const lines = created.stdout.split('\n').filter(Boolean);
      assert.equal(lines.length, 1, created.stdout);
      assert.match(lines[0]!, /^created backup \S+: .*, verified \(\S+\); pruned 1 old backup\(s\)$/);
      assert.deepEqual((await listBackups(envHere.LICENSE_BACKUP_PATH!)).map((backup) => backup.backup_id).includes(old.backup_id), false, 'retention ran');
      const warnings = created.stderr.split('\n').filter((line) => line.includes(' is pending '));
      assert.deepEqual(warnings.map((line) => line.replace(/from \S+ by/, 'from T by').replace(/\(delivery [0-9a-f-]{36}\)/, '(delivery ID)')).sort(), [
        'warning: backup.succeeded to webhook "down" is pending (ECONNREFUSED); it will be retried from T by `serve` or the next command (delivery ID)',
        'warning: backup.succeeded to webhook "failing" is pending (HTTP 500); it will be retried from T by `serve` or the next command (delivery ID)',
      ]);
      const createdId = /^created backup (\S+):/.exec(lines[0]!)![1];
      const tries = failing.received.map((r) => JSON.parse(r.body)).filter((body) => body.data.backup_id === createdId);
      assert.deepEqual(tries.map((body) => body.event), ['backup.succeeded'], 'the failing webhook was tried once, within the command\'s few seconds');
      assert.ok(failing.received.some((r) => JSON.parse(r.body).data.backup_id === old.backup_id), 'and the command also tried what the earlier backup left due');

      // A backup that fails keeps its own error: FILE_WRITE_FAILED, exit 12.
      writeFileSync(path.join(dir, 'a-file'), '');
      const failed = await run(['backup', 'create', '--path', path.join(dir, 'a-file', 'backups')]);
      assert.equal(failed.code, 12, failed.stderr);
      assert.equal(failed.stdout, '');
      assert.match(failed.stderr, /^Error: the backup directory .*a-file\/backups cannot be used: a parent is not a directory; a directory given with --path is never created .*\(FILE_WRITE_FAILED\)$/m);
      assert.deepEqual(failed.stderr.split('\n').filter((line) => line.includes(' is pending ')).map((line) => line.replace(/ webhook "(\w+)".*/, ' $1')).sort(), [
        'warning: backup.failed to down',
        'warning: backup.failed to failing',
      ]);
      const outbox = await openDatabase(envHere.LICENSE_DATABASE_URL!);
      const queued = await outbox.query("SELECT event, target, status FROM notification_deliveries WHERE status = 'pending' ORDER BY event, target").finally(() => outbox.close());
      assert.deepEqual(queued.map((row) => `${row.event} ${row.target}`), ['backup.failed down', 'backup.failed failing', 'backup.succeeded down', 'backup.succeeded failing'],
        'nothing is lost: the serve daemon or the next command retries them');
    });

    it('makes notifications test exit 15 (WEBHOOK_NOT_DELIVERED) after its table', async () => {
      const tested = await run(['notifications', 'test']);
      assert.equal(tested.code, 15, tested.stderr);
      assert.match(tested.stdout, /^down\s+no\s+ECONNREFUSED$/m);
      assert.match(tested.stdout, /^failing\s+no\s+500$/m);
      assert.match(tested.stderr, /^Error: 2 of 2 webhook\(s\) did not take the test event \(WEBHOOK_NOT_DELIVERED\)$/m);
      const json = await run(['notifications', 'test', '--json']);
      assert.equal(json.code, 15);
      assert.deepEqual(json.json().map((r: { webhook: string; delivered: boolean }) => [r.webhook, r.delivered]), [['down', false], ['failing', false]]);
    });
  });
});
