import { readFile } from 'node:fs/promises';
import { rootCertificates } from 'node:tls';
import { describeFsError } from '../fs-errors.js';
import { domainOf, isPlainAddress, mailboxAddress } from './email-address.js';

/** notifications.smtp.* resolved (config/smtp.ts); undefined in Settings when no host is set. */
export interface SmtpSettings {
  readonly host: string;
  readonly port: number;
  /** starttls: STARTTLS required; implicit: TLS from the first byte; none: loopback only. */
  readonly tls: 'starttls' | 'implicit' | 'none';
  readonly user?: string;
  readonly password?: string;
  /** Read at each send, so a rotated file counts without a restart. */
  readonly passwordFile?: string;
  readonly from: string;
  readonly connectTimeoutSeconds: number;
  /** PEM CA certificate(s) trusted besides the system ones; read at each send. */
  readonly caFile?: string;
}

export interface EmailMessage {
  /** Becomes the Message-ID and X-License-Server-Delivery, so receivers can drop duplicates. */
  readonly deliveryId: string;
  /** Exactly one plain address. */
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly html?: string;
}

/**
 * A send that failed. `permanent`: trying again will not help (a 5xx answer, a bad address);
 * otherwise it may (a 4xx answer, no connection, a timeout, a TLS failure). The message is
 * short and safe to log or store: it never holds the password, even where the server or
 * nodemailer quoted the AUTH exchange.
 */
export class EmailSendError extends Error {
  readonly permanent: boolean;
  readonly responseCode?: number;

  constructor(message: string, permanent: boolean, responseCode?: number) {
    super(message);
    this.name = 'EmailSendError';
    this.permanent = permanent;
    if (responseCode !== undefined) this.responseCode = responseCode;
  }
}

// C0 controls, DEL, C1 controls and the Unicode line and paragraph separators: anything a
// mail reader or a header parser might take as the end of a line.
const LINE_BREAKING = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/g;

/** A subject on one line: every control character becomes a space. */
export function oneLineSubject(subject: string): string {
  return subject.replace(LINE_BREAKING, ' ').trim();
}

/** Sends one message over a fresh SMTP connection (nodemailer), closed afterwards. */
export async function sendEmail(smtp: SmtpSettings, message: EmailMessage): Promise<{ readonly response: string }> {
  if (!isPlainAddress(message.to)) {
    throw new EmailSendError(`the recipient ${JSON.stringify(message.to.slice(0, 100))} is not one plain address such as ops@example.com`, true);
  }
  if (!/^[A-Za-z0-9._-]{1,128}$/.test(message.deliveryId)) throw new EmailSendError('the delivery id is not a plain token', true);
  const fromAddress = mailboxAddress(smtp.from);
  if (fromAddress === undefined) throw new EmailSendError('notifications.smtp.from is not an address', true);

  const password = await readPassword(smtp);
  const ca = smtp.caFile === undefined ? undefined : [...rootCertificates, await readSetting(smtp.caFile, 'notifications.smtp.ca_file')];
  const secrets = secretForms(smtp.user, password);
  const timeout = smtp.connectTimeoutSeconds * 1000;

  // Loaded here, not at the top: most commands never send mail and nodemailer is not small.
  const { createTransport } = await import('nodemailer');
  const transport = createTransport({
    host: smtp.host,
    port: smtp.port,
    secure: smtp.tls === 'implicit',
    requireTLS: smtp.tls === 'starttls',
    ignoreTLS: smtp.tls === 'none',
    ...(smtp.user === undefined ? {} : { auth: { user: smtp.user, pass: password ?? '' } }),
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
    tls: { rejectUnauthorized: true, ...(ca ? { ca } : {}) },
    disableFileAccess: true,
    disableUrlAccess: true,
    logger: false,
    debug: false,
  });
  try {
    const info = await transport.sendMail({
      from: smtp.from,
      to: message.to,
      // The envelope is given, not derived from the headers, so that nothing in a header can
      // add a recipient.
      envelope: { from: fromAddress, to: [message.to] },
      subject: oneLineSubject(message.subject),
      text: message.text,
      ...(message.html === undefined ? {} : { html: message.html }),
      messageId: `<${message.deliveryId}@${domainOf(fromAddress)}>`,
      headers: { 'X-License-Server-Delivery': message.deliveryId },
      disableFileAccess: true,
      disableUrlAccess: true,
    });
    return { response: logSafe(String(info.response ?? ''), secrets) };
  } catch (error) {
    throw classify(error, smtp, secrets);
  } finally {
    transport.close();
  }
}

async function readPassword(smtp: SmtpSettings): Promise<string | undefined> {
  if (smtp.password !== undefined) return smtp.password;
  if (smtp.passwordFile === undefined) return undefined;
  // One trailing line break is the file's, not the password's (echo secret > file).
  return (await readSetting(smtp.passwordFile, 'notifications.smtp.password_file')).replace(/\r?\n$/, '');
}

async function readSetting(file: string, key: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    // Not permanent: the operator can put the file back, and the next attempt reads it again.
    throw new EmailSendError(`cannot read ${key} ${file}: ${describeFsError(error)}`, false);
  }
}

/** The password as it may appear on the wire: itself, Base64 (AUTH LOGIN) and the AUTH PLAIN blob. */
function secretForms(user: string | undefined, password: string | undefined): string[] {
  if (!password) return [];
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  return [password, b64(password), b64(`\0${user ?? ''}\0${password}`), b64(`${user ?? ''}\0${user ?? ''}\0${password}`)].filter((form) => form.length > 0);
}

/** One line, at most 200 characters, with every secret form replaced. */
function logSafe(text: string, secrets: readonly string[]): string {
  let safe = text;
  for (const secret of secrets) safe = safe.split(secret).join('***');
  safe = safe.replace(LINE_BREAKING, ' ').replace(/\s+/g, ' ').trim();
  return safe.length > 200 ? `${safe.slice(0, 199)}…` : safe;
}

interface NodemailerError extends Error {
  readonly code?: string;
  readonly originalCode?: string;
  readonly responseCode?: number;
  readonly response?: string;
  readonly command?: string;
  readonly timeoutType?: string;
}

/**
 * A failure as one safe line, and whether it is final. Only the relay's own refusal is: a
 * 5yz reply (RFC 5321 4.2.1), a refused recipient or login among them. Everything else may go
 * through on another attempt, whatever nodemailer named it (a garbage greeting is EPROTOCOL,
 * a reply without a code EENVELOPE or EMESSAGE, a broken handshake ETLS), so the decision
 * rests on the reply code, never on a list of error names that the next version extends.
 */
function classify(thrown: unknown, smtp: SmtpSettings, secrets: readonly string[]): EmailSendError {
  if (thrown instanceof EmailSendError) return thrown;
  const error = (thrown ?? {}) as NodemailerError;
  const responseCode = typeof error.responseCode === 'number' ? error.responseCode : undefined;
  const refused = responseCode !== undefined && responseCode >= 500 && responseCode <= 599;
  if (error.code === 'ETLS' && error.command === 'STARTTLS' && error.response !== undefined) {
    // With requireTLS nodemailer sends STARTTLS whether or not it was offered, and stops at
    // the refusal: nothing, not even AUTH, goes out in the clear. The relay may be fixed, so
    // this refusal is retried, whatever its code.
    return new EmailSendError(`STARTTLS is required but ${smtp.host}:${smtp.port} does not offer it (${logSafe(error.response, secrets)})`, false, responseCode);
  }
  return new EmailSendError(describeFailure(error, smtp, secrets), refused, responseCode);
}

function describeFailure(error: NodemailerError, smtp: SmtpSettings, secrets: readonly string[]): string {
  const where = `${smtp.host}:${smtp.port}`;
  const safe = (text: string) => logSafe(text, secrets);
  const code = error.code;
  const responseCode = error.responseCode;
  if (responseCode !== undefined && responseCode >= 400 && responseCode <= 599) return `SMTP ${safe(error.response ?? String(responseCode))}`;
  if (code === 'ETIMEDOUT') {
    const what = {
      CONNECT_TIMEOUT: `timed out connecting to ${where}`,
      GREETING_TIMEOUT: `timed out waiting for ${where} to greet`,
      UPGRADE_TIMEOUT: `timed out in the TLS handshake with ${where}`,
    }[error.timeoutType ?? ''];
    return what ?? `timed out waiting for ${where} to answer`;
  }
  // A system error such as ECONNREFUSED or ECONNRESET: its code says it all.
  if (error.originalCode && /^E[A-Z]+$/.test(error.originalCode) && code !== 'ETLS') return `${error.originalCode} connecting to ${where}`;
  if (code === 'ETLS' || (error.originalCode && /CERT|TLS|SSL/.test(error.originalCode))) {
    // Node's own TLS reasons ("self-signed certificate", "Hostname/IP does not match") carry no secret.
    // OpenSSL's own errors come as "...:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:file:line:": its reason is enough.
    const reason = String(error.message).replace(/^Error initiating TLS - /, '').replace(/^.*:error:[0-9A-F]+:[^:]+:[^:]*:([^:]+):.*$/s, '$1');
    return `TLS with ${where} failed: ${safe(reason).replace(/: \d{3} .*$/, '')}`;
  }
  // nodemailer appends the reply to a message that may quote it already ("response=X: X").
  let text = String(error.message ?? error);
  if (error.response && text.endsWith(`: ${error.response}`) && text.slice(0, -error.response.length - 2).includes(error.response)) text = text.slice(0, -error.response.length - 2);
  if (code === 'EAUTH' || code === 'ENOAUTH') return `SMTP authentication failed: ${safe(text)}`;
  return `${code ?? 'error'} talking to ${where}: ${safe(text)}`;
}
