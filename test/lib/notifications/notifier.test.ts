import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { DeliveryOutcome } from '../../../src/lib/notifications/deliverer.js';
import { SIGNATURE_HEADER } from '../../../src/lib/notifications/notifier.js';
import { raiseEvent } from '../../../src/lib/notifications/outbox.js';
import type { Resolver } from '../../../src/lib/notifications/address.js';
import type { EventName } from '../../../src/lib/notifications/events.js';
import { renderTemplate } from '../../../src/lib/notifications/render.js';
import { readNotificationSettings, redactSettings, replaceNotificationSettings, REDACTED } from '../../../src/lib/notifications/settings.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { scaledMs } from '../../support/busy-machine.js';
import { testDeliverer } from '../../support/outbox-rows.js';
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
  /**
   * Raises `event` through the outbox and delivers it with up to `attempts` attempts, the
   * deliverer's clock stepping past each retry's wait; one outcome per target, as the last
   * attempt left it.
   */
  const deliver = async (
    event: EventName,
    data: Record<string, unknown>,
    options: { attempts?: number; timeoutMs?: number; lookup?: Resolver; allowLinkLocal?: boolean } = {},
  ) => {
    const ids = await db.transaction((tx) => raiseEvent(tx, event, data));
    let at = Date.now();
    const deliverer = testDeliverer(db, {
      server: () => 'licenses.example.com',
      retry: () => ({ firstDelaySeconds: 1, maxDelaySeconds: 1, giveUpHours: 1 }),
      allowLinkLocal: () => options.allowLinkLocal ?? false,
      log: (entry) => logs.push(entry),
      clock: () => new Date(at),
      // A receiver on loopback answers at once; on a loaded machine (CI, Node 22) 500 ms was
      // not enough for the first attempt, and the count of attempts came out 2.
      webhookTimeoutMs: options.timeoutMs ?? scaledMs(2000),
      ...(options.lookup ? { lookup: options.lookup } : {}),
    });
    const last = new Map<string, DeliveryOutcome>();
    for (let attempt = 0; attempt < (options.attempts ?? 4); attempt += 1) {
      for (const outcome of await deliverer.deliverDue({ ids })) last.set(outcome.id, outcome);
      if (ids.every((id) => last.has(id) && last.get(id)!.status !== 'pending')) break;
      at += 1000;
    }
    return ids.flatMap((id) => (last.has(id) ? [last.get(id)!] : [])).map((outcome) => ({
      webhook: outcome.target,
      delivered: outcome.status === 'delivered',
      attempts: outcome.attempts,
      status: outcome.http_status,
      error: outcome.error,
      code: outcome.code,
    }));
  };
  const only = (hook: { name: string; url: string; secret?: string }) =>
    replaceNotificationSettings(db, { webhooks: [{ secret: 'hook-secret-0123456789', ...hook }], rules: [{ event: '*', webhook: hook.name }] }, { actor: 'test' });
  const refused = (error: unknown) => error instanceof LicenseServerError && error.code === 'WEBHOOK_ADDRESS_REFUSED';

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
      const results = await deliver('backup.failed', { trigger: 'scheduled', error: 'disk full' });
      assert.deepEqual(results.map((r) => [r.webhook, r.delivered, r.attempts]), [['ops', true, 1], ['ops@example.com', false, 4]], 'the email waits, and is retried: no SMTP server is configured');
      assert.equal(results[1]!.error, 'no SMTP server is configured (notifications.smtp.host)');
      assert.equal(receiver.received.length, 1);
      assert.equal(other.received.length, 0, 'rules decide which events go where');
      const [delivery] = receiver.received;
      assert.ok(signatureValid(delivery!, generated.ops!));
      assert.ok(!signatureValid(delivery!, 'wrong-secret'));
      const body = JSON.parse(delivery!.body);
      assert.deepEqual({ ...body, id: undefined, occurred_at: undefined }, { event: 'backup.failed', server: 'licenses.example.com', data: { trigger: 'scheduled', error: 'disk full' }, id: undefined, occurred_at: undefined });
      assert.equal(delivery!.headers['x-license-server-event'], 'backup.failed');
      const [row] = await db.query("SELECT id, event_id FROM notification_deliveries WHERE channel = 'webhook' ORDER BY created_at DESC LIMIT 1");
      assert.equal(delivery!.headers['x-license-server-delivery'], row!.id, 'the delivery id, stable across retries');
      assert.equal(body.id, row!.event_id, 'the body carries the event id, shared by every target of the event');
      await deliver('license.checked_out', { license_id: 'x' });
      assert.ok(signatureValid(other.received[0]!, 'audit-secret-0123456789'));
    } finally {
      await receiver.close();
      await other.close();
    }
  });

  it('sends nothing for an event no enabled rule selects, and a rule saved meanwhile counts at the next event', async () => {
    const receiver = await startReceiver();
    try {
      await replaceNotificationSettings(db, {
        webhooks: [{ name: 'ops', url: receiver.url, secret: 'hook-secret-0123456789' }],
        rules: [{ event: 'backup.*', webhook: 'ops' }, { event: 'license.checked_out', webhook: 'ops', enabled: false }],
      }, { actor: 'test' });
      assert.deepEqual(await deliver('license.checked_out', { license_id: 'x' }), []);
      assert.equal(receiver.received.length, 0);
      await replaceNotificationSettings(db, { webhooks: [{ name: 'ops', url: receiver.url, secret: 'hook-secret-0123456789' }], rules: [{ event: 'license.*', webhook: 'ops' }] }, { actor: 'test' });
      const [result] = await deliver('license.checked_out', { license_id: 'x' });
      assert.equal(result?.delivered, true);
      assert.equal(receiver.received.length, 1);
    } finally {
      await receiver.close();
    }
  });

  it('retries a failing receiver with backoff until it recovers, and logs every attempt', async () => {
    const flaky = await startReceiver((count) => (count < 3 ? 500 : 204));
    try {
      await replaceNotificationSettings(db, { webhooks: [{ name: 'flaky', url: flaky.url, secret: 's3cr3t-s3cr3t-s3cr3t' }], rules: [{ event: '*', webhook: 'flaky' }] }, { actor: 'test' });
      logs.length = 0;
      const [result] = await deliver('backup.succeeded', { backup_id: 'b' });
      assert.deepEqual([result!.delivered, result!.attempts, result!.status], [true, 3, 204]);
      assert.equal(flaky.received.length, 3);
      assert.equal(new Set(flaky.received.map((r) => r.headers['x-license-server-delivery'])).size, 1, 'one delivery id on every attempt');
      assert.equal(new Set(flaky.received.map((r) => r.body)).size, 1, 'the same body bytes on every attempt');
      assert.deepEqual(logs.map((entry) => [entry.msg, entry.attempt]), [['notification attempt failed', 1], ['notification attempt failed', 2], ['notification delivered', 3]]);
      assert.ok(!JSON.stringify(logs).includes('s3cr3t'), 'the secret is never logged');
    } finally {
      await flaky.close();
    }
  });

  it('never lets a hanging or dead webhook fail the work: raising only writes the outbox, and an attempt ends at its timeout', async () => {
    const hanging = await startReceiver(() => 'hang');
    try {
      await replaceNotificationSettings(db, {
        webhooks: [{ name: 'hang', url: hanging.url, secret: 'x'.repeat(20) }, { name: 'dead', url: 'http://127.0.0.1:1/none', secret: 'y'.repeat(20) }],
        rules: [{ event: '*', webhook: 'hang' }, { event: '*', webhook: 'dead' }],
      }, { actor: 'test' });
      const ids = await db.transaction((tx) => raiseEvent(tx, 'backup.restored', { backup_id: 'b' }));
      assert.equal(ids.length, 2);
      assert.equal(hanging.received.length, 0, 'raising sends nothing');
      await db.execute(`DELETE FROM notification_deliveries WHERE id IN (?, ?)`, ids);
      logs.length = 0;
      const results = await deliver('backup.restored', { backup_id: 'b' }, { attempts: 2, timeoutMs: 200 });
      assert.deepEqual(results.map((r) => [r.webhook, r.delivered, r.attempts, r.error]).sort(), [['dead', false, 2, 'ECONNREFUSED'], ['hang', false, 2, 'timed out']]);
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

  it('lists alert rules in one order on every read and engine (by event, webhook, email), not by random id', async () => {
    const hooks = [{ name: 'zulu', url: 'https://hooks.example.com/z' }, { name: 'alpha', url: 'https://hooks.example.com/a' }];
    const rules = [
      { event: 'backup.succeeded', webhook: 'zulu' }, { event: 'backup.failed', email: 'b@example.com' }, { event: 'backup.*', webhook: 'alpha' },
      { event: '*', webhook: 'zulu' }, { event: 'backup.failed', webhook: 'alpha' }, { event: 'backup.failed', email: 'a@example.com' },
      { event: 'license.checked_out', webhook: 'alpha' }, { event: 'backup.restored', webhook: 'zulu' }, { event: 'backup.failed', webhook: 'zulu' },
    ];
    await replaceNotificationSettings(db, { webhooks: hooks, rules }, { actor: 'test' });
    const key = (rule: { event: string; webhook?: string; email?: string }) => `${rule.event}\u0000${rule.webhook ?? ''}\u0000${rule.email ?? ''}`;
    const expected = rules.map(key).sort();
    assert.deepEqual((await readNotificationSettings(db)).rules.map(key), expected);
    await replaceNotificationSettings(db, { webhooks: hooks, rules: [...rules].reverse() }, { actor: 'test' });
    assert.deepEqual((await readNotificationSettings(db)).rules.map(key), expected, 'the same order whatever order they were given in');
  });

  it('quotes at most a short, escaped prefix of a bad name or key in its refusal, however long', async () => {
    const huge = 'k'.repeat(200_000);
    const bad = [{ [huge]: 1 }, { [`x\u0000${huge}`]: 1 }];
    for (const settings of bad) {
      await assert.rejects(replaceNotificationSettings(db, settings, { actor: 'test' }), (error: unknown) => {
        assert.ok(error instanceof LicenseServerError && error.code === 'INVALID_INPUT');
        assert.ok(error.message.length < 200, `message of ${error.message.length} characters`);
        assert.doesNotMatch(error.message, /\u0000/);
        return true;
      });
    }
  });

  it('does not follow redirects: a 307 is a failed attempt, logged with its status and without the credentials of its Location', async () => {
    let target = '';
    const receiver = await startReceiver((_, at) => (at === '/hook' ? { status: 307, headers: { location: target } } : 200));
    try {
      target = receiver.url.replace('http://', 'http://locuser:location-password@').replace('/hook', '/elsewhere?token=location-token');
      await only({ name: 'moved', url: receiver.url });
      logs.length = 0;
      const [result] = await deliver('backup.succeeded', { backup_id: 'b' }, { attempts: 2 });
      assert.deepEqual([result!.delivered, result!.attempts, result!.status], [false, 2, 307]);
      assert.deepEqual(receiver.received.map((r) => r.path), ['/hook', '/hook'], 'the signed body never went to the Location');
      const failed = logs.filter((entry) => entry.msg === 'notification attempt failed');
      assert.deepEqual(failed.map((entry) => entry.status), [307, 307]);
      assert.match(String(failed[0]!.location), /^http:\/\/locuser:\*\*\*@127\.0\.0\.1:\d+\/elsewhere\?\*\*\*$/);
      assert.ok(!JSON.stringify([logs, result]).includes('location-password'));
      assert.ok(!JSON.stringify([logs, result]).includes('location-token'));
    } finally {
      await receiver.close();
    }
  });

  it('reads at most a few KiB of an answer: a 256 MiB body is cut off, not held in memory', async function () {
    this.timeout(60_000);
    const size = 256 * 1024 * 1024;
    const receiver = await startReceiver(() => ({ status: 200, bodyBytes: size }));
    try {
      await only({ name: 'huge', url: receiver.url });
      const peakBefore = process.resourceUsage().maxRSS * 1024;
      const [result] = await deliver('backup.succeeded', { backup_id: 'b' }, { attempts: 1, timeoutMs: 30_000 });
      const peakGrowth = process.resourceUsage().maxRSS * 1024 - peakBefore;
      assert.deepEqual([result!.delivered, result!.status], [true, 200]);
      // What the receiver could hand to its socket before the notifier hung up: the kernel's
      // socket buffers on both ends, a few MiB, not the body.
      assert.ok(receiver.bodyBytesWritten() < 32 * 1024 * 1024, `the receiver sent ${receiver.bodyBytesWritten()} bytes`);
      assert.ok(peakGrowth < 64 * 1024 * 1024, `peak RSS grew by ${peakGrowth} bytes`);
    } finally {
      await receiver.close();
    }
  });

  it('sends URL credentials as Basic authentication and never logs or reports them, nor a query string', async () => {
    const receiver = await startReceiver(() => 500);
    try {
      const url = receiver.url.replace('http://', 'http://hookuser:url-password-1@') + '?token=query-secret-1';
      const dead = 'http://deaduser:url-password-2@127.0.0.1:1/none?token=query-secret-2';
      await replaceNotificationSettings(db, {
        webhooks: [{ name: 'creds', url, secret: 'hook-secret-0123456789' }, { name: 'dead', url: dead, secret: 'hook-secret-0123456789' }],
        rules: [{ event: '*', webhook: 'creds' }, { event: '*', webhook: 'dead' }],
      }, { actor: 'test' });
      logs.length = 0;
      const results = await deliver('backup.succeeded', { backup_id: 'b' }, { attempts: 2 });
      assert.deepEqual(results.map((r) => [r.webhook, r.delivered, r.attempts]), [['creds', false, 2], ['dead', false, 2]]);
      assert.equal(receiver.received.length, 2);
      assert.equal(receiver.received[0]!.headers.authorization, `Basic ${Buffer.from('hookuser:url-password-1').toString('base64')}`);
      assert.equal(receiver.received[0]!.path, '/hook?token=query-secret-1');
      const shown = redactSettings(await readNotificationSettings(db));
      assert.deepEqual(shown.webhooks.map((hook) => hook.url), [
        receiver.url.replace('http://', 'http://hookuser:***@') + '?***',
        'http://deaduser:***@127.0.0.1:1/none?***',
      ]);
      const everything = JSON.stringify([logs, results, shown]);
      for (const secret of ['url-password-1', 'url-password-2', 'query-secret-1', 'query-secret-2']) assert.ok(!everything.includes(secret), secret);
      assert.ok(logs.some((entry) => entry.msg === 'notification attempt failed' && entry.webhook === 'dead' && entry.error === 'ECONNREFUSED'));
      const stored = JSON.stringify(await db.query('SELECT * FROM notification_deliveries'));
      for (const secret of ['url-password-1', 'url-password-2', 'query-secret-1', 'query-secret-2', 'hook-secret-0123456789']) assert.ok(!stored.includes(secret), `outbox holds ${secret}`);

      // The redacted form goes back in as it came out: the stored password and token are kept.
      await replaceNotificationSettings(db, shown, { actor: 'test' });
      assert.deepEqual((await readNotificationSettings(db)).webhooks.map((hook) => hook.url), [url, dead]);
      await assert.rejects(
        replaceNotificationSettings(db, { webhooks: [{ name: 'new', url: 'https://someone:***@hooks.example.com/' }] }, { actor: 'test' }),
        (error: unknown) => error instanceof LicenseServerError && error.code === 'INVALID_INPUT' && /no stored URL/.test(error.message),
      );
    } finally {
      await receiver.close();
    }
  });

  it('refuses link-local webhook addresses (cloud metadata) at set time unless they are allowed; loopback and private ones stay allowed', async () => {
    const linkLocal = [
      'http://169.254.169.254/latest/meta-data/',
      'http://169.254.0.1:8080/',
      'http://2852039166/',
      'http://0xa9.0xfe.0xa9.0xfe/',
      'http://[fe80::1]/hook',
      'https://[febf:ffff::1]/',
      'http://[::ffff:169.254.169.254]/',
      'http://[0:0:0:0:0:ffff:a9fe:a9fe]/',
    ];
    for (const url of linkLocal) {
      await assert.rejects(only({ name: 'meta', url }), (error: unknown) => refused(error) && !(error as Error).message.includes(url), url);
    }
    for (const url of linkLocal) {
      await replaceNotificationSettings(db, { webhooks: [{ name: 'meta', url, secret: 'hook-secret-0123456789' }] }, { actor: 'test' }, { allowLinkLocal: true });
    }
    for (const url of ['http://127.0.0.1:9/', 'http://[::1]/', 'http://10.0.0.1/', 'http://192.168.1.10/', 'http://172.16.0.1/', 'http://[fc00::1]/', 'http://[fec0::1]/', 'http://169.253.255.255/', 'http://169.255.0.1/', 'https://hooks.example.com/']) {
      await only({ name: 'fine', url });
    }
  });

  it('refuses at delivery a link-local address, literal or resolved from a hostname, unless allowed, and connects to the address it checked', async () => {
    const receiver = await startReceiver();
    try {
      const port = new URL(receiver.url).port;
      const answers: Record<string, Array<{ address: string; family: number }>> = {
        'metadata.test': [{ address: '169.254.169.254', family: 4 }],
        'mapped.test': [{ address: '::ffff:169.254.169.254', family: 6 }],
        'mixed.test': [{ address: '127.0.0.1', family: 4 }, { address: 'fe80::a9fe:a9fe', family: 6 }],
        'hooks.test': [{ address: '127.0.0.1', family: 4 }],
      };
      const lookups: string[] = [];
      const lookup = async (hostname: string) => {
        lookups.push(hostname);
        return answers[hostname] ?? [];
      };
      for (const host of ['metadata.test', 'mapped.test', 'mixed.test']) {
        await only({ name: 'resolved', url: `http://${host}:${port}/hook` });
        logs.length = 0;
        const [result] = await deliver('backup.succeeded', { backup_id: 'b' }, { attempts: 3, lookup });
        assert.deepEqual([result!.delivered, result!.attempts, result!.code], [false, 1, 'WEBHOOK_ADDRESS_REFUSED'], host);
        assert.match(result!.error!, /link-local/);
        assert.deepEqual(logs.map((entry) => entry.msg), ['notification attempt failed', 'notification gave up'], 'a refused address is not retried');
      }
      assert.deepEqual(lookups, ['metadata.test', 'mapped.test', 'mixed.test']);
      assert.equal(receiver.received.length, 0);

      await only({ name: 'resolved', url: `http://hooks.test:${port}/hook` });
      const [delivered] = await deliver('backup.succeeded', { backup_id: 'b' }, { attempts: 1, lookup });
      assert.equal(delivered!.delivered, true, 'the connection goes to the address the lookup gave');
      assert.equal(receiver.received[0]!.headers.host, `hooks.test:${port}`);

      // A literal address stored before this check existed (or restored from an old backup).
      await db.execute("UPDATE notification_webhooks SET url = 'http://[::ffff:a9fe:a9fe]:9/' WHERE name = 'resolved'");
      const [literal] = await deliver('backup.succeeded', { backup_id: 'b' }, { attempts: 1, lookup });
      assert.deepEqual([literal!.delivered, literal!.code], [false, 'WEBHOOK_ADDRESS_REFUSED']);

      // Allowed: the notifier tries to connect (an fe80:: address without a zone fails at
      // once, so no packet leaves for a real link-local host).
      await db.execute("UPDATE notification_webhooks SET url = 'http://[fe80::1]:9/' WHERE name = 'resolved'");
      const [allowed] = await deliver('backup.succeeded', { backup_id: 'b' }, { attempts: 1, lookup, allowLinkLocal: true });
      assert.equal(allowed!.delivered, false);
      assert.equal(allowed!.code, undefined);
      assert.doesNotMatch(allowed!.error!, /link-local/);
    } finally {
      await receiver.close();
    }
  });

  it('renders templates as plain text from the event fields', () => {
    const event = { id: 'i', event: 'backup.failed', occurred_at: 'T', server: 'S', data: { error: '<b>disk</b> & "full"', nested: { a: 1 } } };
    assert.equal(renderTemplate('{{server}}: {{ error }} {{nested}} {{missing}}.', event), 'S: <b>disk</b> & "full" {"a":1} .');
  });
});
