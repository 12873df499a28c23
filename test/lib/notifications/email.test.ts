import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EmailSendError, oneLineSubject, sendEmail, type EmailMessage } from '../../../src/lib/notifications/email.js';
import { busyFactor } from '../../support/busy-machine.js';
import { startBlackHole } from '../../support/black-hole.js';
import { startScriptedSmtp, type SmtpScript } from '../../support/scripted-smtp.js';
import { startSmtpServer, type SmtpTestServer } from '../../support/smtp-server.js';

const message = (more: Partial<EmailMessage> = {}): EmailMessage => ({
  deliveryId: randomUUID(),
  to: 'ops@customer.example',
  subject: 'License expires in 7 days',
  text: 'The license 1234 of ACME expires on 2030-01-31.\n',
  ...more,
});

async function sendError(promise: Promise<unknown>): Promise<EmailSendError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof EmailSendError, String(error));
    return error;
  }
  assert.fail('expected the send to fail');
}

describe('email over SMTP (a real server on loopback)', function () {
  this.timeout(30_000);
  let smtp: SmtpTestServer;
  let dir: string;
  before(async () => {
    smtp = await startSmtpServer();
    dir = mkdtempSync(path.join(tmpdir(), 'license-server-email-'));
  });
  after(async () => {
    await smtp.close();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    smtp.received.length = 0;
    smtp.failNext(250, 0);
  });

  it('delivers over STARTTLS with AUTH, with its delivery id as Message-ID and X-License-Server-Delivery', async () => {
    const sent = message({ html: '<p>The license <b>1234</b> expires.</p>' });
    const { response } = await sendEmail(smtp.settings(), sent);
    assert.match(response, /^250 /);
    const [mail] = await smtp.waitFor(1);
    assert.equal(mail!.secure, true, 'the mail came after STARTTLS');
    assert.equal(mail!.user, 'mailer');
    assert.equal(mail!.mailFrom, 'alerts@license.example');
    assert.deepEqual(mail!.rcptTo, ['ops@customer.example']);
    const parsed = mail!.parsed;
    assert.equal(parsed.from!.text, '"License Server" <alerts@license.example>');
    assert.equal(parsed.from!.value[0]!.address, 'alerts@license.example');
    assert.deepEqual((Array.isArray(parsed.to) ? parsed.to : [parsed.to!]).flatMap((to) => to.value.map((entry) => entry.address)), ['ops@customer.example']);
    assert.equal(parsed.subject, 'License expires in 7 days');
    assert.equal(parsed.messageId, `<${sent.deliveryId}@license.example>`);
    assert.equal(parsed.headers.get('x-license-server-delivery'), sent.deliveryId);
    assert.equal(parsed.text, sent.text);
    assert.equal((parsed.html as string).trim(), sent.html);
  });

  it('sends a text body alone when no HTML is given', async () => {
    await sendEmail(smtp.settings(), message());
    const [mail] = await smtp.waitFor(1);
    assert.equal(mail!.parsed.html, false);
    assert.match(mail!.raw.toString(), /^Content-Type: text\/plain/im);
    assert.doesNotMatch(mail!.raw.toString(), /text\/html/i);
  });

  it('cannot be made to add a header or a recipient by CR/LF in the subject', async () => {
    const customer = 'ACME\r\nBcc: evil@example.com';
    await sendEmail(smtp.settings(), message({ subject: `License of ${customer} expires\nX-Injected: yes` }));
    const [mail] = await smtp.waitFor(1);
    assert.deepEqual(mail!.rcptTo, ['ops@customer.example'], 'exactly one envelope recipient');
    assert.equal(mail!.parsed.bcc, undefined);
    assert.equal(mail!.parsed.headers.has('bcc'), false);
    assert.equal(mail!.parsed.headers.has('x-injected'), false);
    assert.equal(mail!.parsed.subject, 'License of ACME  Bcc: evil@example.com expires X-Injected: yes');
    assert.doesNotMatch(mail!.raw.toString(), /^(Bcc|X-Injected):/im);
    assert.equal(oneLineSubject('a\u2028b\u0085c\x00d\te'), 'a b c d e');
  });

  it('refuses a recipient that is not one plain address, permanently, without connecting', async () => {
    const attempts = smtp.attempts();
    for (const to of ['a@example.com, evil@example.com', 'a@example.com;evil@example.com', 'Name <a@example.com>', '"a"@example.com', 'a@example.com\r\nBcc: evil@example.com', 'a @example.com', 'no-at-sign', '']) {
      const error = await sendError(sendEmail(smtp.settings(), message({ to })));
      assert.equal(error.permanent, true, to);
      assert.match(error.message, /is not one plain address/);
    }
    assert.equal(smtp.attempts(), attempts);
  });

  it('delivers over implicit TLS', async () => {
    const implicit = await startSmtpServer({ tls: 'implicit' });
    try {
      await sendEmail(implicit.settings(), message());
      const [mail] = await implicit.waitFor(1);
      assert.equal(mail!.secure, true);
      assert.equal(mail!.user, 'mailer');
    } finally {
      await implicit.close();
    }
  });

  it('verifies the certificate: without ca_file the self-signed one is refused, and that may be retried', async () => {
    const error = await sendError(sendEmail(smtp.settings({ caFile: undefined }), message()));
    assert.equal(error.permanent, false);
    assert.match(error.message, /^TLS with 127\.0\.0\.1:\d+ failed: self[- ]signed certificate/);
    assert.equal(smtp.received.length, 0);
  });

  it('reports a wrong password as permanent, and never shows the password', async () => {
    const password = 'Wrong-Pa55word-that-must-not-leak';
    const error = await sendError(sendEmail(smtp.settings({ password }), message()));
    assert.equal(error.permanent, true);
    assert.equal(error.responseCode, 535);
    assert.match(error.message, /^SMTP 535 /);
    for (const form of [password, Buffer.from(password).toString('base64'), Buffer.from(`\0mailer\0${password}`).toString('base64')]) {
      assert.ok(!error.message.includes(form), error.message);
      assert.ok(!String(error.stack).includes(form));
    }
    assert.equal(smtp.received.length, 0);
  });

  it('reads the password from password_file at each send, so a rotated file counts', async () => {
    const file = path.join(dir, 'smtp-password');
    writeFileSync(file, 'stale-password-0123\n');
    const settings = smtp.settings({ password: undefined, passwordFile: file });
    assert.equal((await sendError(sendEmail(settings, message()))).responseCode, 535);
    writeFileSync(file, `${smtp.password}\n`);
    await sendEmail(settings, message());
    await smtp.waitFor(1);
    rmSync(file);
    const missing = await sendError(sendEmail(settings, message()));
    assert.equal(missing.permanent, false);
    assert.match(missing.message, /^cannot read notifications\.smtp\.password_file /);
  });

  it('reports a stopped server as ECONNREFUSED, not permanent, and delivers once it is back on the same port', async () => {
    const port = smtp.port;
    await smtp.stop();
    try {
      const error = await sendError(sendEmail(smtp.settings(), message()));
      assert.equal(error.permanent, false);
      assert.equal(error.message, `ECONNREFUSED connecting to 127.0.0.1:${port}`);
    } finally {
      await smtp.start();
    }
    assert.equal(smtp.port, port);
    await sendEmail(smtp.settings(), message());
    await smtp.waitFor(1);
  });

  it('treats a 4xx answer as worth retrying and a 5xx answer as permanent', async () => {
    smtp.failNext(451, 1);
    const later = await sendError(sendEmail(smtp.settings(), message()));
    assert.deepEqual([later.permanent, later.responseCode], [false, 451]);
    assert.equal(later.message, 'SMTP 451 4.0.0 Local error in processing, try again later');
    smtp.failNext(550, 1);
    const never = await sendError(sendEmail(smtp.settings(), message()));
    assert.deepEqual([never.permanent, never.responseCode], [true, 550]);
    assert.equal(never.message, 'SMTP 550 5.0.0 Mailbox unavailable');
    assert.equal(smtp.received.length, 0);
    await sendEmail(smtp.settings(), message());
    await smtp.waitFor(1);
  });

  it('gives up on a server that never answers the connection after connect_timeout', async () => {
    const hole = await startBlackHole();
    try {
      const port = Number(hole.addr.split(':')[1]);
      const started = Date.now();
      const error = await sendError(sendEmail(smtp.settings({ port, connectTimeoutSeconds: 1 }), message()));
      const took = Date.now() - started;
      assert.equal(error.permanent, false);
      assert.equal(error.message, `timed out connecting to 127.0.0.1:${port}`);
      assert.ok(took >= 900 && took < 5000, `took ${took} ms`);
    } finally {
      hole.stop();
    }
  });

  it('gives up on a server that accepts but never greets after connect_timeout', async () => {
    const sockets = new Set<Socket>();
    const mute = createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    try {
      const port = (mute.address() as AddressInfo).port;
      const started = Date.now();
      const error = await sendError(sendEmail(smtp.settings({ port, connectTimeoutSeconds: 1 }), message()));
      assert.equal(error.permanent, false);
      assert.match(error.message, new RegExp(`^timed out (connecting to|waiting for) 127\\.0\\.0\\.1:${port}`));
      assert.ok(Date.now() - started < 5000);
    } finally {
      for (const socket of sockets) socket.destroy();
      mute.close();
    }
  });

  it('sends plain SMTP (tls: none) to 127.0.0.1', async () => {
    const plain = await startSmtpServer({ tls: 'plain' });
    try {
      assert.equal(plain.settings().tls, 'none');
      await sendEmail(plain.settings(), message());
      const [mail] = await plain.waitFor(1);
      assert.equal(mail!.secure, false);
      assert.equal(mail!.user, 'mailer');
    } finally {
      await plain.close();
    }
  });

  it('refuses a server without STARTTLS when STARTTLS is required, before any AUTH or mail goes out in the clear', async () => {
    const plain = await startSmtpServer({ tls: 'plain' });
    try {
      const error = await sendError(sendEmail(plain.settings({ tls: 'starttls' }), message()));
      assert.equal(error.permanent, false);
      assert.match(error.message, /^STARTTLS is required but 127\.0\.0\.1:\d+ does not offer it/);
      assert.equal(plain.attempts(), 0);
      assert.equal(plain.authAttempts(), 0);
      assert.equal(plain.received.length, 0);
    } finally {
      await plain.close();
    }
  });
});

/**
 * Whether a failure is retried is decided by the relay's reply code alone: a 5xx reply is a
 * refusal, and everything else (a 4xx, no reply, a reply without a code, a broken connection
 * or handshake) may go through next time, whatever name nodemailer gives the error.
 */
describe('email failures: permanent only for a 5xx reply (a scripted relay on loopback)', function () {
  this.timeout(30_000);
  const garbage = 'Wh@t is th1s \u00ff\u00fe not SMTP';
  const cases: Array<{ title: string; script: SmtpScript; permanent: boolean; code?: number; auth?: boolean; tls?: 'starttls'; message?: RegExp }> = [
    { title: 'a garbage greeting (EPROTOCOL)', script: { greeting: garbage }, permanent: false, message: /^EPROTOCOL talking to 127\.0\.0\.1:\d+: Invalid greeting\. response=Wh@t is th1s ÿþ not SMTP$/ },
    { title: 'a greeting with a 2xx code that is no greeting (EPROTOCOL)', script: { greeting: '250 hello?' }, permanent: false, code: 250 },
    { title: 'a greeting with a code outside SMTP (EPROTOCOL)', script: { greeting: '999 what' }, permanent: false, code: 999 },
    { title: 'a 421 greeting', script: { greeting: '421 4.3.2 Service not available' }, permanent: false, code: 421 },
    { title: 'a reset before the greeting (ECONNRESET)', script: { greeting: 'reset' }, permanent: false },
    { title: 'a close after the greeting (ECONNECTION)', script: { ehlo: 'close' }, permanent: false },
    { title: 'no answer to EHLO (ETIMEDOUT)', script: { ehlo: 'silent' }, permanent: false },
    { title: 'a MAIL FROM answer without a code (EENVELOPE)', script: { mail: garbage }, permanent: false },
    { title: 'a 451 to MAIL FROM (EENVELOPE)', script: { mail: '451 4.3.0 try again later' }, permanent: false, code: 451 },
    { title: 'a 450 to RCPT TO (EENVELOPE)', script: { rcpt: '450 4.2.0 mailbox busy' }, permanent: false, code: 450 },
    { title: 'a DATA answer without a code (EENVELOPE)', script: { data: garbage }, permanent: false },
    { title: 'an answer without a code after the message (EMESSAGE)', script: { message: garbage }, permanent: false },
    { title: 'a reset after the message (ECONNRESET)', script: { message: 'reset' }, permanent: false },
    { title: 'an AUTH answer without a code (EAUTH)', script: { ehlo: '250-relay.test\r\n250 AUTH PLAIN LOGIN', auth: garbage }, permanent: false, auth: true },
    { title: 'a STARTTLS accepted, then no TLS handshake (ETLS)', script: { ehlo: '250-relay.test\r\n250 STARTTLS' }, permanent: false, tls: 'starttls', message: /^TLS with 127\.0\.0\.1:\d+ failed: wrong version number$/ },
    { title: 'a 554 greeting', script: { greeting: '554 5.3.2 No SMTP service here' }, permanent: true, code: 554 },
    { title: 'a 553 to MAIL FROM (EENVELOPE)', script: { mail: '553 5.1.8 sender address rejected' }, permanent: true, code: 553 },
    { title: 'a 550 to RCPT TO (EENVELOPE)', script: { rcpt: '550 5.1.1 mailbox unavailable' }, permanent: true, code: 550 },
    { title: 'a 554 to DATA (EENVELOPE)', script: { data: '554 5.5.1 no valid recipients' }, permanent: true, code: 554 },
    { title: 'a 552 after the message (EMESSAGE)', script: { message: '552 5.3.4 message too big' }, permanent: true, code: 552 },
    { title: 'a 535 to AUTH (EAUTH)', script: { ehlo: '250-relay.test\r\n250 AUTH PLAIN LOGIN', auth: '535 5.7.8 credentials invalid' }, permanent: true, code: 535, auth: true },
  ];
  for (const { title, script, permanent, code, auth, tls, message: message_ } of cases) {
    it(`${permanent ? 'gives up at once on' : 'retries'} ${title}`, async () => {
      const relay = await startScriptedSmtp(() => script);
      try {
        const password = 'relay-Pa55word-never-shown';
        // 1 s on an idle machine; longer on a busy one, where a handshake on loopback took longer (CI).
        const settings = relay.settings({ connectTimeoutSeconds: Math.min(8, Math.ceil(busyFactor())), ...(auth ? { user: 'mailer', password } : {}), ...(tls ? { tls } : {}) });
        const error = await sendError(sendEmail(settings, message()));
        assert.equal(error.permanent, permanent, `${error.message} (${JSON.stringify(error)})`);
        assert.equal(error.responseCode, code, error.message);
        assert.equal(relay.accepted(), 0);
        if (message_ !== undefined) assert.match(error.message, message_);
        assert.doesNotMatch(error.message, /[\r\n]/);
        assert.ok(!error.message.includes(password) && !error.message.includes(Buffer.from(password).toString('base64')), error.message);
      } finally {
        await relay.close();
      }
    });
  }
});
