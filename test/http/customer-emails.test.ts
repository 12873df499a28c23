import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';
import { startSmtpServer, type ReceivedMail, type SmtpTestServer } from '../support/smtp-server.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * Issue 35, item 14: the emails a customer receives through the default templates, as a real
 * SMTP server took them from a real daemon. They name the license by the start of its key,
 * which the customer knows (never by its internal id), and their counts agree with their
 * nouns: "allows 1 machine", "in 1 day".
 */
describe('customer-facing emails from the default templates', function () {
  this.timeout(60_000);
  let work: string;
  let env: Record<string, string>;
  let smtp: SmtpTestServer;
  let serve: ServeProcess | undefined;
  let license: { id: string; key: string };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-customer-emails-'));
    smtp = await startSmtpServer();
    env = { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite'), LICENSE_DATA_DIR: path.join(work, 'data'), LICENSE_ISSUER: 'licenses.acme.test', ...smtp.env() };
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    ok(await cli('init'));
    writeFileSync(path.join(work, 'n.json'), JSON.stringify({ rules: [{ event: 'license.expiring_soon', email: 'customer' }, { event: 'machine.limit_exceeded', email: 'customer' }] }));
    ok(await cli('notifications', 'set', '--file', path.join(work, 'n.json')));
    const customer = ok(await cli('customer', 'create', '--name', 'Acme GmbH', '--email', 'buyer@acme.test', '--json')).json();
    // Ends in 12 hours: the daemon's first scan finds it within the 1-day window.
    const validUntil = new Date(Date.now() + 12 * 3_600_000).toISOString();
    license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', validUntil, '--max-machines', '1', '--json')).json();
    serve = await startServe(env);
  });
  after(async () => {
    await serve?.stop('SIGKILL');
    await smtp.close();
    rmSync(work, { recursive: true, force: true });
  });

  const mailWith = async (subject: RegExp): Promise<ReceivedMail> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const mail = smtp.received.find((candidate) => subject.test(candidate.parsed.subject ?? ''));
      if (mail) return mail;
      if (Date.now() > deadline) assert.fail(`no email with a subject like ${subject}; received: ${JSON.stringify(smtp.received.map((m) => m.parsed.subject))}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const prefix = () => license.key.slice(0, 8);

  it('license.expiring_soon: "expires in 1 day", naming the key the customer knows', async () => {
    const mail = await mailWith(/^Your license expires/);
    assert.deepEqual(mail.rcptTo, ['buyer@acme.test']);
    assert.equal(mail.parsed.subject, 'Your license expires in 1 day');
    const text = mail.parsed.text ?? '';
    assert.match(text, new RegExp(`^Dear Acme GmbH,\\n\\nyour license with the key ${prefix()}\\.\\.\\. expires at \\S+Z, in 1 day\\. Please renew it`));
    assert.ok(!text.includes(license.id) && !(mail.parsed.subject ?? '').includes(license.id), 'the internal id is not shown to the customer');
  });

  it('machine.limit_exceeded: "allows 1 machine; 1 new machine was refused"', async () => {
    const validate = (hardwareId: string) => api(serve!.url, 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: hardwareId, version: '1.0.0' } });
    assert.equal((await validate('machine-one')).status, 200);
    const refused = await validate('machine-two');
    assert.equal(refused.body.valid, false, JSON.stringify(refused.body));
    const mail = await mailWith(/^\[licenses\.acme\.test\] Machine limit reached/);
    assert.deepEqual(mail.rcptTo, ['buyer@acme.test']);
    assert.equal(mail.parsed.subject, `[licenses.acme.test] Machine limit reached on license ${prefix()}...`);
    assert.equal((mail.parsed.text ?? '').trim(), `License ${prefix()}... of Acme GmbH allows 1 machine; 1 new machine was refused, the last one machine-two.`);
  });
});
