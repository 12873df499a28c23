import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli, type CliResult } from '../support/cli.js';
import { startReceiver } from '../support/receiver.js';
import { startSmtpServer, type SmtpTestServer } from '../support/smtp-server.js';

describe('notifications test --email (the built CLI, a real SMTP server)', function () {
  this.timeout(60_000);
  let work: string;
  let smtp: SmtpTestServer;
  let base: Record<string, string>;
  const run = (args: string[], env: Record<string, string> = {}) => runCli(args, { cwd: work, env: { ...base, ...env } });
  const assertNoPassword = (result: CliResult, password = smtp.password) => {
    const all = result.stdout + result.stderr;
    for (const form of [password, Buffer.from(password).toString('base64'), Buffer.from(`\0${smtp.user}\0${password}`).toString('base64')]) {
      assert.ok(!all.includes(form), `the password (or its Base64) in the output:\n${all}`);
    }
  };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-notifications-email-'));
    base = { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite') };
    ok(await runCli(['init'], { cwd: work, env: base }));
    smtp = await startSmtpServer();
  });
  after(async () => {
    await smtp.close();
    rmSync(work, { recursive: true, force: true });
  });
  beforeEach(() => {
    smtp.received.length = 0;
  });

  it('sends a test email and reports it in the table, the password taken from LICENSE_NOTIFICATIONS_SMTP_PASSWORD', async () => {
    const piped = ok(await run(['notifications', 'test', '--email', 'ops@customer.example'], smtp.env()));
    assertNoPassword(piped);
    assert.match(piped.stdout, /^TARGET\s+DELIVERED\s+STATUS$/m);
    assert.match(piped.stdout, /^email:ops@customer\.example\s+yes\s+250 /m);
    const [mail] = await smtp.waitFor(1);
    assert.deepEqual(mail!.rcptTo, ['ops@customer.example']);
    assert.equal(mail!.user, smtp.user);
    assert.equal(mail!.secure, true);
    assert.equal(mail!.parsed.subject, 'Test notification from license-server');
    assert.match(mail!.parsed.text ?? '', /notification\.test/);
    const deliveryId = mail!.parsed.headers.get('x-license-server-delivery') as string;
    assert.equal(mail!.parsed.messageId, `<${deliveryId}@license.example>`);

    const json = ok(await run(['notifications', 'test', '--email', 'ops@customer.example', '--json'], smtp.env()));
    assertNoPassword(json);
    const [row] = json.json();
    assert.deepEqual({ ...row, response: undefined, delivery_id: undefined }, {
      target: 'email:ops@customer.example', channel: 'email', email: 'ops@customer.example', delivered: true, response: undefined, delivery_id: undefined,
    });
    const [, second] = await smtp.waitFor(2);
    assert.equal(second!.parsed.headers.get('x-license-server-delivery'), row.delivery_id);
  });

  it('takes the password from notifications.smtp.password_file', async () => {
    const file = path.join(work, 'smtp-password');
    writeFileSync(file, `${smtp.password}\n`, { mode: 0o600 });
    const env = smtp.env({ LICENSE_NOTIFICATIONS_SMTP_PASSWORD: '', LICENSE_NOTIFICATIONS_SMTP_PASSWORD_FILE: file });
    assertNoPassword(ok(await run(['notifications', 'test', '--email', 'ops@customer.example'], env)));
    await smtp.waitFor(1);
    // The file is read at the send, not once: a wrong one now is refused by the server.
    writeFileSync(file, 'Rotated-Wrong-Password-77\n');
    const refused = await run(['notifications', 'test', '--email', 'ops@customer.example'], env);
    assert.equal(refused.code, 15, refused.stderr);
    assert.match(refused.stdout, /^email:ops@customer\.example\s+no\s+SMTP 535 /m);
    assertNoPassword(refused, 'Rotated-Wrong-Password-77');
  });

  it('with the SMTP server down, prints the table and then EMAIL_NOT_DELIVERED, exit 15', async () => {
    const port = smtp.port;
    await smtp.stop();
    try {
      const down = await run(['notifications', 'test', '--email', 'ops@customer.example'], smtp.env());
      assertNoPassword(down);
      assert.equal(down.code, 15, down.stderr);
      assert.deepEqual(down.stdout.trimEnd().split('\n').map((line) => line.split(/\s{2,}/)), [
        ['TARGET', 'DELIVERED', 'STATUS'],
        ['email:ops@customer.example', 'no', `ECONNREFUSED connecting to 127.0.0.1:${port}`],
      ]);
      assert.match(down.stderr, /^Error: the test email to ops@customer\.example was not delivered \(EMAIL_NOT_DELIVERED\)$/m);
      const json = await run(['notifications', 'test', '--email', 'ops@customer.example', '--json'], smtp.env());
      assert.equal(json.code, 15);
      assert.deepEqual(json.json().map((r: { target: string; delivered: boolean; error: string; permanent: boolean }) => [r.target, r.delivered, r.error, r.permanent]),
        [['email:ops@customer.example', false, `ECONNREFUSED connecting to 127.0.0.1:${port}`, false]]);
    } finally {
      await smtp.start();
    }
  });

  it('without SMTP settings fails with SMTP_NOT_CONFIGURED (exit 3), naming notifications.smtp.host, and sends nothing', async () => {
    const receiver = await startReceiver();
    try {
      writeFileSync(path.join(work, 'hooks.yaml'), `webhooks:\n  - name: ops\n    url: ${receiver.url}\n    secret: a-secret-of-the-webhook\n`);
      ok(await run(['notifications', 'set', '--file', path.join(work, 'hooks.yaml')]));
      const missing = await run(['notifications', 'test', '--email', 'ops@customer.example', '--webhook', 'ops']);
      assert.equal(missing.code, 3, missing.stderr);
      assert.equal(missing.stdout, '');
      assert.match(missing.stderr, /^Error: no SMTP server is configured: notifications\.smtp\.host is not set.* \(SMTP_NOT_CONFIGURED\)$/m);
      assert.equal(receiver.received.length, 0, 'no webhook was sent either');
      const bad = await run(['notifications', 'test', '--email', 'a@example.com,b@example.com'], smtp.env());
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--email must be one plain address .*\(INVALID_INPUT\)/);

      // --email alone sends only the email; with --webhook both, a row each.
      ok(await run(['notifications', 'test', '--email', 'ops@customer.example'], smtp.env()));
      assert.equal(receiver.received.length, 0);
      const both = ok(await run(['notifications', 'test', '--email', 'ops@customer.example', '--webhook', 'ops', '--json'], smtp.env())).json();
      assert.deepEqual(both.map((r: { target: string; channel: string; webhook?: string; delivered: boolean }) => [r.target, r.channel, r.webhook ?? null, r.delivered]), [
        ['ops', 'webhook', 'ops', true],
        ['email:ops@customer.example', 'email', null, true],
      ]);
      assert.equal(receiver.received.length, 1);
      await smtp.waitFor(2);
    } finally {
      await receiver.close();
    }
  });

  it('reports a webhook and an email that both failed, each with its own code, exit 15', async () => {
    await smtp.stop();
    try {
      writeFileSync(path.join(work, 'dead.yaml'), 'webhooks:\n  - name: dead\n    url: http://127.0.0.1:9/hook\n    secret: a-secret-of-the-webhook\n');
      ok(await run(['notifications', 'set', '--file', path.join(work, 'dead.yaml')]));
      const failed = await run(['notifications', 'test', '--email', 'ops@customer.example', '--webhook', 'dead'], smtp.env());
      assert.equal(failed.code, 15);
      assert.match(failed.stdout, /^dead\s+no\s+ECONNREFUSED$/m);
      assert.match(failed.stdout, /^email:ops@customer\.example\s+no\s+ECONNREFUSED/m);
      assert.match(failed.stderr, /\(WEBHOOK_NOT_DELIVERED\)$/m);
      assert.match(failed.stderr, /\(EMAIL_NOT_DELIVERED\)$/m);
      assertNoPassword(failed);
    } finally {
      await smtp.start();
    }
  });
});
