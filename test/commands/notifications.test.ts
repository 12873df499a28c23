import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from '../support/fake-clock.js';
import { runCli, ok } from '../support/cli.js';
import { startReceiver } from '../support/receiver.js';
import { api, startServe } from '../support/serve.js';


describe('notifications from the command line and the daemon', function () {
  this.timeout(60_000);
  let work: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, { env, cwd: work });

  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-notifications-'));
    env = { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite'), LICENSE_BACKUP_PATH: path.join(work, 'backups') };
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
});
