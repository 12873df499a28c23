import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Notifier, SIGNATURE_HEADER } from '../../../src/lib/notifications/notifier.js';
import { renderTemplate } from '../../../src/lib/notifications/render.js';
import { readNotificationSettings, redactSettings, replaceNotificationSettings, REDACTED } from '../../../src/lib/notifications/settings.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { startReceiver, type Received } from '../../support/receiver.js';

/** What a receiver must do: recompute the HMAC over the exact body and compare in constant time. */
function signatureValid(received: Received, secret: string): boolean {
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(received.body).digest('hex')}`);
  const given = Buffer.from(String(received.headers[SIGNATURE_HEADER.toLowerCase()] ?? ''));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

describe('notifications', () => {
  let work: string;
  let db: Database;
  const logs: Array<Record<string, unknown>> = [];
  const notifier = (retryDelaysMs = [10, 20, 40], timeoutMs = 500) =>
    new Notifier({ database: () => db, server: () => 'licenses.example.com', log: (entry) => logs.push(entry), retryDelaysMs, timeoutMs });

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-notify-'));
    db = await openDatabase(path.join(work, 'db.sqlite'));
  });
  after(async () => {
    await db.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('delivers selected events with an HMAC-SHA256 signature the receiver can check', async () => {
    const receiver = await startReceiver();
    const other = await startReceiver();
    try {
      const { generated } = await replaceNotificationSettings(db, {
        webhooks: [{ name: 'ops', url: receiver.url }, { name: 'audit', url: other.url, secret: 'audit-secret-0123456789' }],
        rules: [{ event: 'backup.*', webhook: 'ops' }, { event: 'license.checked_out', webhook: 'audit' }, { event: 'backup.failed', email: 'ops@example.com' }],
        email_templates: [{ event: 'backup.failed', subject: 'Backup failed on {{server}}', body: 'Error: {{error}}' }],
      }, { actor: 'test' });
      assert.match(generated.ops!, /^[A-Za-z0-9_-]{32}$/, 'a webhook without a secret gets one');
      const results = await notifier().deliver('backup.failed', { trigger: 'scheduled', error: 'disk full' });
      assert.deepEqual(results.map((r) => [r.webhook, r.delivered, r.attempts]), [['ops', true, 1]]);
      assert.equal(receiver.received.length, 1);
      assert.equal(other.received.length, 0, 'rules decide which events go where');
      const [delivery] = receiver.received;
      assert.ok(signatureValid(delivery!, generated.ops!));
      assert.ok(!signatureValid(delivery!, 'wrong-secret'));
      const body = JSON.parse(delivery!.body);
      assert.deepEqual({ ...body, id: undefined, occurred_at: undefined }, { event: 'backup.failed', server: 'licenses.example.com', data: { trigger: 'scheduled', error: 'disk full' }, id: undefined, occurred_at: undefined });
      assert.equal(delivery!.headers['x-license-server-event'], 'backup.failed');
      assert.equal(delivery!.headers['x-license-server-delivery'], body.id);
      const email = logs.find((entry) => entry.msg === 'email not sent: no SMTP server is configured');
      assert.equal(email?.subject, 'Backup failed on licenses.example.com');
      await notifier().deliver('license.checked_out', { license_id: 'x' });
      assert.ok(signatureValid(other.received[0]!, 'audit-secret-0123456789'));
    } finally {
      await receiver.close();
      await other.close();
    }
  });

  it('retries a failing receiver with backoff until it recovers, and logs every attempt', async () => {
    const flaky = await startReceiver((count) => (count < 3 ? 500 : 204));
    try {
      await replaceNotificationSettings(db, { webhooks: [{ name: 'flaky', url: flaky.url, secret: 's3cr3t-s3cr3t-s3cr3t' }], rules: [{ event: '*', webhook: 'flaky' }] }, { actor: 'test' });
      logs.length = 0;
      const [result] = await notifier().deliver('backup.succeeded', { backup_id: 'b' });
      assert.deepEqual([result!.delivered, result!.attempts, result!.status], [true, 3, 204]);
      assert.equal(flaky.received.length, 3);
      assert.deepEqual(logs.map((entry) => [entry.msg, entry.attempt]), [['webhook attempt failed', 1], ['webhook attempt failed', 2], ['webhook delivered', 3]]);
      assert.ok(!JSON.stringify(logs).includes('s3cr3t'), 'the secret is never logged');
    } finally {
      await flaky.close();
    }
  });

  it('never lets a hanging or dead webhook block or fail the work: emit returns at once', async () => {
    const hanging = await startReceiver(() => 'hang');
    try {
      await replaceNotificationSettings(db, {
        webhooks: [{ name: 'hang', url: hanging.url, secret: 'x'.repeat(20) }, { name: 'dead', url: 'http://127.0.0.1:1/none', secret: 'y'.repeat(20) }],
        rules: [{ event: '*', webhook: 'hang' }, { event: '*', webhook: 'dead' }],
      }, { actor: 'test' });
      const slow = notifier([20], 200);
      const started = Date.now();
      slow.emit('backup.restored', { backup_id: 'b' });
      assert.ok(Date.now() - started < 50, 'emit does not wait for delivery');
      await slow.settle(5000);
      const given = logs.filter((entry) => entry.msg === 'webhook gave up').map((entry) => entry.webhook).sort();
      assert.deepEqual(given, ['dead', 'hang']);
    } finally {
      await hanging.close();
    }
  });

  it('keeps a stored secret when settings come back with [redacted], and refuses bad settings whole', async () => {
    await replaceNotificationSettings(db, { webhooks: [{ name: 'keep', url: 'https://hooks.example.com/x', secret: 'kept-secret-0123456789' }] }, { actor: 'test' });
    const shown = redactSettings(await readNotificationSettings(db));
    assert.equal(shown.webhooks[0]!.secret, REDACTED);
    await replaceNotificationSettings(db, shown, { actor: 'test' });
    assert.equal((await readNotificationSettings(db)).webhooks[0]!.secret, 'kept-secret-0123456789');
    const bad = [
      { webhooks: [{ name: 'x', url: 'ftp://example.com' }] },
      { rules: [{ event: 'backup.exploded', email: 'a@b' }] },
      { rules: [{ event: 'backup.*', webhook: 'missing' }] },
      { rules: [{ event: '*' }] },
      { colour: 'blue' },
      [],
    ];
    for (const settings of bad) {
      await assert.rejects(replaceNotificationSettings(db, settings, { actor: 'test' }), (error: unknown) => error instanceof LicenseServerError && error.code === 'INVALID_INPUT', JSON.stringify(settings));
    }
    assert.equal((await readNotificationSettings(db)).webhooks[0]!.name, 'keep', 'nothing changed');
  });

  it('renders templates as plain text from the event fields', () => {
    const event = { id: 'i', event: 'backup.failed', occurred_at: 'T', server: 'S', data: { error: '<b>disk</b> & "full"', nested: { a: 1 } } };
    assert.equal(renderTemplate('{{server}}: {{ error }} {{nested}} {{missing}}.', event), 'S: <b>disk</b> & "full" {"a":1} .');
  });
});
