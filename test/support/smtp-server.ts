import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import type { SmtpSettings } from '../../src/lib/notifications/email.js';
import { scaledMs } from './busy-machine.js';

/**
 * A real SMTP server on a loopback port, for tests that must see mail cross a TCP connection
 * the way a relay would take it (smtp-server, the server half of nodemailer's project).
 *
 *   const smtp = await startSmtpServer();              // STARTTLS + AUTH PLAIN/LOGIN
 *   await sendEmail(smtp.settings(), message);         // or smtp.env() for a spawned CLI
 *   const [mail] = await smtp.waitFor(1);
 *   mail.rcptTo;                                       // envelope RCPT TO, as received
 *   mail.parsed.subject; mail.parsed.headers.get('x-license-server-delivery');
 *   smtp.failNext(451, 2);                             // the next 2 messages get "451 ..."
 *   await smtp.stop(); ... await smtp.start();         // an outage, then back on the SAME port
 *   await smtp.close();                                // in after(): stops and deletes the cert
 *
 * Options: `tls` 'starttls' (default: STARTTLS offered, AUTH only after it), 'implicit' (TLS
 * from the first byte) or 'plain' (no STARTTLS offered, AUTH allowed in the clear, for tests
 * of `notifications.smtp.tls: none` and of a client that must refuse such a server); `user`
 * and `password` (default 'mailer' / 'smtp-test-password-0123'); `auth: false` to take mail
 * without AUTH. The certificate is a throwaway self-signed one for CN localhost with SAN
 * DNS:localhost and IP:127.0.0.1; `caFile` is its path, for notifications.smtp.ca_file.
 *
 * Only messages the server accepted are in `received`; `attempts` counts every DATA it was
 * sent (refused ones too), `authAttempts` every AUTH and `authFailures` every refused one.
 */
export interface ReceivedMail {
  /** Envelope MAIL FROM. */
  readonly mailFrom: string;
  /** Envelope RCPT TO, every address the client named. */
  readonly rcptTo: readonly string[];
  readonly raw: Buffer;
  readonly parsed: ParsedMail;
  /** The user the session authenticated as, if any. */
  readonly user: string | undefined;
  /** Whether the session was encrypted (implicit TLS or after STARTTLS) when the mail came. */
  readonly secure: boolean;
}

export interface SmtpServerOptions {
  readonly tls?: 'starttls' | 'implicit' | 'plain';
  readonly user?: string;
  readonly password?: string;
  readonly auth?: boolean;
}

export interface SmtpTestServer {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly user: string;
  readonly password: string;
  /** PEM of the server's self-signed certificate. */
  readonly caFile: string;
  readonly received: ReceivedMail[];
  readonly attempts: () => number;
  readonly authFailures: () => number;
  /** Every AUTH the server was sent, accepted or not. */
  readonly authAttempts: () => number;
  /** The next `count` messages are answered `code` at the end of DATA (and not kept). */
  failNext(code: number, count?: number): void;
  /** Resolves once at least `count` messages were received (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedMail[]>;
  /** Settings that reach this server, for sendEmail; `overrides` replace fields. */
  settings(overrides?: Partial<SmtpSettings>): SmtpSettings;
  /** LICENSE_NOTIFICATIONS_SMTP_* variables that reach this server, for a spawned CLI. */
  env(overrides?: Record<string, string>): Record<string, string>;
  /** Closes the listener and every open session: connecting now fails with ECONNREFUSED. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  /** stop() and delete the certificate. */
  close(): Promise<void>;
}

const FAIL_TEXT: Record<number, string> = {
  421: 'Service not available, closing channel',
  450: 'Mailbox unavailable, try again later',
  451: 'Local error in processing, try again later',
  452: 'Insufficient system storage',
  550: 'Mailbox unavailable',
  552: 'Exceeded storage allocation',
  554: 'Transaction failed',
};

export async function startSmtpServer(options: SmtpServerOptions = {}): Promise<SmtpTestServer> {
  const mode = options.tls ?? 'starttls';
  const user = options.user ?? 'mailer';
  const password = options.password ?? 'smtp-test-password-0123';
  const requireAuth = options.auth ?? true;
  const dir = mkdtempSync(path.join(tmpdir(), 'license-server-smtp-'));
  const keyFile = path.join(dir, 'key.pem');
  const caFile = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', keyFile, '-out', caFile], { stdio: 'ignore' });
  const key = readFileSync(keyFile);
  const cert = readFileSync(caFile);

  const received: ReceivedMail[] = [];
  const waiters = new Set<() => void>();
  let attempts = 0;
  let authFailures = 0;
  let authAttempts = 0;
  let failures: { code: number; left: number } | undefined;
  let port = 0;
  let server: SMTPServer | undefined;

  const make = () =>
    new SMTPServer({
      secure: mode === 'implicit',
      key,
      cert,
      // Hidden is not enough: smtp-server would still take a STARTTLS it did not offer.
      hideSTARTTLS: mode === 'plain',
      ...(mode === 'plain' ? { disabledCommands: ['STARTTLS'] } : {}),
      allowInsecureAuth: mode === 'plain',
      authMethods: ['PLAIN', 'LOGIN'],
      authOptional: !requireAuth,
      logger: false,
      // A stopped server must let go of its sessions at once, as a crashed relay would.
      closeTimeout: 10,
      onAuth(auth, _session, callback) {
        authAttempts += 1;
        if (auth.username === user && auth.password === password) return callback(null, { user });
        authFailures += 1;
        const error = Object.assign(new Error('5.7.8 Authentication credentials invalid'), { responseCode: 535 });
        callback(error);
      },
      onData(stream, session: SMTPServerSession, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => {
          attempts += 1;
          if (failures && failures.left > 0) {
            failures.left -= 1;
            const code = failures.code;
            return callback(Object.assign(new Error(`${code >= 500 ? '5' : '4'}.0.0 ${FAIL_TEXT[code] ?? 'Refused by the test'}`), { responseCode: code }));
          }
          const raw = Buffer.concat(chunks);
          simpleParser(raw).then(
            (parsed) => {
              received.push({
                mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
                rcptTo: session.envelope.rcptTo.map((entry) => entry.address),
                raw,
                parsed,
                user: typeof session.user === 'string' ? session.user : undefined,
                secure: session.secure,
              });
              for (const wake of [...waiters]) wake();
              callback(null, 'Message queued');
            },
            (error: Error) => callback(error),
          );
        });
      },
    });

  const start = async () => {
    server = make();
    const listening = server;
    await new Promise<void>((resolve, reject) => {
      listening.once('error', reject);
      listening.listen(port, '127.0.0.1', () => {
        listening.off('error', reject);
        resolve();
      });
    });
    port = (listening.server.address() as AddressInfo).port;
    // A session the client drops (a test timing out) must not crash the test process.
    listening.on('error', () => undefined);
  };
  const stop = async () => {
    const closing = server;
    server = undefined;
    if (closing) await new Promise<void>((resolve) => closing.close(() => resolve()));
  };
  await start();

  return {
    host: '127.0.0.1',
    get port() {
      return port;
    },
    user,
    password,
    caFile,
    received,
    attempts: () => attempts,
    authFailures: () => authFailures,
    authAttempts: () => authAttempts,
    failNext(code, count = 1) {
      failures = { code, left: count };
    },
    waitFor(count, declaredMs = 10_000) {
      const timeoutMs = scaledMs(declaredMs);
      if (received.length >= count) return Promise.resolve(received);
      return new Promise((resolve, reject) => {
        const wake = () => {
          if (received.length < count) return;
          clearTimeout(timer);
          waiters.delete(wake);
          resolve(received);
        };
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`the SMTP server received ${received.length} message(s), not ${count}, within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(wake);
      });
    },
    settings(overrides = {}) {
      return {
        host: '127.0.0.1',
        port,
        tls: mode === 'implicit' ? 'implicit' : mode === 'plain' ? 'none' : 'starttls',
        ...(requireAuth ? { user, password } : {}),
        from: 'License Server <alerts@license.example>',
        connectTimeoutSeconds: 5,
        caFile,
        ...overrides,
      };
    },
    env(overrides = {}) {
      return {
        LICENSE_NOTIFICATIONS_SMTP_HOST: '127.0.0.1',
        LICENSE_NOTIFICATIONS_SMTP_PORT: String(port),
        LICENSE_NOTIFICATIONS_SMTP_TLS: mode === 'implicit' ? 'implicit' : mode === 'plain' ? 'none' : 'starttls',
        ...(requireAuth ? { LICENSE_NOTIFICATIONS_SMTP_USER: user, LICENSE_NOTIFICATIONS_SMTP_PASSWORD: password } : {}),
        LICENSE_NOTIFICATIONS_SMTP_FROM: 'alerts@license.example',
        LICENSE_NOTIFICATIONS_SMTP_CONNECT_TIMEOUT: '5',
        LICENSE_NOTIFICATIONS_SMTP_CA_FILE: caFile,
        ...overrides,
      };
    },
    stop,
    start,
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
