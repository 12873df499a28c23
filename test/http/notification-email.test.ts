import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { eventually } from '../support/fake-clock.js';
import { startScriptedSmtp } from '../support/scripted-smtp.js';
import { startSmtpServer, type SmtpTestServer } from '../support/smtp-server.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * Email through the outbox to a real SMTP server (STARTTLS and AUTH on a loopback port): a
 * server that is down for a while, then up, gets each email once; a temporary refusal is
 * retried, a permanent one is not.
 */
forEachEngine('email notifications through the outbox', (fixture) => {
  let work: string;
  let env: Record<string, string>;
  let smtp: SmtpTestServer;
  let serve: ServeProcess | undefined;
  let token: string;

  before(async function () {
    this.timeout(60_000);
    work = mkdtempSync(path.join(tmpdir(), 'license-email-outbox-'));
    smtp = await startSmtpServer();
    env = {
      LICENSE_DATABASE_URL: await fixture.freshUrl(),
      LICENSE_DATA_DIR: path.join(work, 'data'),
      LICENSE_ISSUER: 'licenses.acme.test',
      LICENSE_NOTIFICATIONS_RETRY_FIRST_DELAY: '1',
      LICENSE_NOTIFICATIONS_RETRY_MAX_DELAY: '2',
      ...smtp.env(),
    };
    ok(await runCli(['init'], { env, cwd: work }));
    writeFileSync(path.join(work, 'n.json'), JSON.stringify({
      rules: [{ event: 'license.checked_out', email: 'customer' }, { event: 'license.checked_out', email: 'ops@acme.test' }],
      email_templates: [{ event: 'license.checked_out', subject: 'Checked out for {{customer_name}}', body: 'License {{license_id}} until {{valid_until}}.' }],
    }));
    ok(await runCli(['notifications', 'set', '--file', path.join(work, 'n.json')], { env, cwd: work }));
    serve = await startServe(env);
    token = serve.token!;
  });
  after(async () => {
    await serve?.stop('SIGKILL');
    await smtp.close();
    rmSync(work, { recursive: true, force: true });
  });

  const outbox = async () => {
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      return await db.query<{ id: string; status: string; attempts: number; target: string; last_error: string | null }>(
        "SELECT id, status, attempts, target, last_error FROM notification_deliveries WHERE channel = 'email' ORDER BY created_at, id");
    } finally {
      await db.close();
    }
  };
  const newLicense = async (customerName: string) => {
    const customer = (await api(serve!.url, 'POST', '/api/customers', { token, body: { name: 'Customer' } })).body;
    // Written directly: the API refuses control characters in a name, but a store restored
    // from elsewhere may hold them, and a template must not turn them into headers.
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    await db.execute('UPDATE customers SET name = ?, email = ? WHERE id = ?', [customerName, 'buyer@customer.test', customer.id]).finally(() => db.close());
    return (await api(serve!.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' } })).body;
  };
  const checkOut = async (license: { id: string }) =>
    assert.equal((await api(serve!.url, 'POST', `/api/licenses/${license.id}/checkout`, { token, body: { ttl_days: 3 } })).status, 200);
  const byDelivery = () => {
    const counts = new Map<string, number>();
    for (const mail of smtp.received) {
      const id = String(mail.parsed.headers.get('x-license-server-delivery'));
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    return counts;
  };

  it('holds every email while the SMTP server is down and delivers each once when it is back', async function () {
    this.timeout(60_000);
    await smtp.stop();
    const license = await newLicense('Zoë\r\nBcc: thief@evil.test');
    for (let i = 0; i < 3; i += 1) await checkOut(license);
    await eventually(async () => (await outbox()).filter((row) => row.attempts >= 2).length === 6, 'six emails failed twice', 20_000);
    assert.ok((await outbox()).every((row) => row.status === 'pending' && /^ECONNREFUSED/.test(row.last_error ?? '')), JSON.stringify(await outbox()));
    assert.equal(smtp.received.length, 0);

    await smtp.start();
    await eventually(async () => (await outbox()).every((row) => row.status === 'delivered'), 'all six delivered', 20_000);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const rows = await outbox();
    assert.deepEqual([...byDelivery().entries()].sort(), rows.map((row) => [row.id, 1]).sort(), 'each email exactly once');
    assert.deepEqual(rows.map((row) => row.target).sort(), [...Array(3).fill('buyer@customer.test'), ...Array(3).fill('ops@acme.test')]);

    const mail = smtp.received.find((candidate) => candidate.rcptTo.includes('buyer@customer.test'))!;
    assert.deepEqual(mail.rcptTo, ['buyer@customer.test'], 'a CR/LF in the customer name adds no recipient');
    assert.equal(mail.parsed.headers.get('bcc'), undefined);
    assert.equal(mail.parsed.subject, 'Checked out for Zoë Bcc: thief@evil.test');
    assert.equal(mail.parsed.text?.trim(), `License ${license.id} until ${/until (\S+)\./.exec(mail.parsed.text ?? '')![1]}.`);
    const deliveryId = String(mail.parsed.headers.get('x-license-server-delivery'));
    assert.equal(mail.parsed.messageId, `<${deliveryId}@${smtp.settings().from.replace(/^.*@/, '').replace(/>$/, '')}>`);
    assert.ok(mail.secure, 'sent after STARTTLS');
  });

  it('retries a temporary refusal (451) and gives up at once on a permanent one (550)', async function () {
    this.timeout(60_000);
    const before = new Set((await outbox()).map((row) => row.id));
    smtp.failNext(451, 2);
    const license = await newLicense('Temporary');
    await checkOut(license);
    await eventually(async () => (await outbox()).filter((row) => !before.has(row.id) && row.status === 'delivered').length === 2, 'both delivered after the 451s', 20_000);
    const fresh = (await outbox()).filter((row) => !before.has(row.id));
    assert.deepEqual(fresh.map((row) => row.attempts).reduce((a, b) => a + b), 4, 'two refused attempts, then one each');

    const seen = new Set((await outbox()).map((row) => row.id));
    smtp.failNext(550, 2);
    await checkOut(license);
    await eventually(async () => (await outbox()).filter((row) => !seen.has(row.id) && row.status === 'failed').length === 2, 'both failed', 20_000);
    const refused = (await outbox()).filter((row) => !seen.has(row.id));
    assert.deepEqual(refused.map((row) => row.attempts), [1, 1], 'a 5xx is not retried');
    assert.match(refused[0]!.last_error!, /^SMTP 550\b/);
  });

  it('retries an email whose relay first answered a garbage greeting, and delivers it once', async function () {
    this.timeout(60_000);
    // A real peer in front of the SMTP server: the first connection is greeted with garbage,
    // every later one is passed through to the server.
    const relay = await startScriptedSmtp((n) => (n === 1 ? { greeting: '\u0016\u0003\u0001 garbage, not SMTP' } : 'forward'), `127.0.0.1:${smtp.port}`);
    const own = { ...env, LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_DATA_DIR: path.join(work, 'garbage'), LICENSE_NOTIFICATIONS_SMTP_PORT: String(relay.port) };
    let daemon: ServeProcess | undefined;
    try {
      ok(await runCli(['init'], { env: own, cwd: work }));
      writeFileSync(path.join(work, 'ops.json'), JSON.stringify({ rules: [{ event: 'license.created', email: 'ops@acme.test' }] }));
      ok(await runCli(['notifications', 'set', '--file', path.join(work, 'ops.json')], { env: own, cwd: work }));
      daemon = await startServe(own);
      const customer = (await api(daemon.url, 'POST', '/api/customers', { token: daemon.token!, body: { name: 'Garbage Greeting' } })).body;
      await api(daemon.url, 'POST', '/api/licenses', { token: daemon.token!, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' } });
      const rows = async () => {
        const db = await openDatabase(own.LICENSE_DATABASE_URL);
        try {
          return await db.query<{ id: string; status: string; attempts: number }>("SELECT id, status, attempts FROM notification_deliveries WHERE channel = 'email'");
        } finally {
          await db.close();
        }
      };
      await eventually(async () => (await rows()).some((row) => row.status !== 'pending'), 'the email was delivered or given up', 30_000);
      const [row] = await rows();
      assert.deepEqual([row!.status, row!.attempts], ['delivered', 2], 'the garbage greeting cost one attempt, and was retried');
      const mails = smtp.received.filter((mail) => String(mail.parsed.headers.get('x-license-server-delivery')) === row!.id);
      assert.equal(mails.length, 1, 'delivered exactly once');
      assert.match(mails[0]!.parsed.text ?? '', /Garbage Greeting/);
      assert.equal(relay.connections(), 2);
      const attemptLog = daemon.stderr().split('\n').filter((line) => line.includes('"notification attempt failed"'));
      assert.equal(attemptLog.length, 1, daemon.stderr());
      assert.match(attemptLog[0]!, /EPROTOCOL talking to 127\.0\.0\.1:\d+: Invalid greeting/);
    } finally {
      await daemon?.stop('SIGKILL');
      await relay.close();
    }
  });
});
