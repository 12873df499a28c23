import { isIP } from 'node:net';
import { LicenseServerError } from '../errors.js';
import { mailboxAddress } from '../notifications/email-address.js';
import type { SmtpSettings } from '../notifications/email.js';
import type { ResolvedSetting } from './resolve.js';

const DEFAULT_PORT = { implicit: 465, starttls: 587, none: 25 } as const;

/**
 * notifications.smtp.* as one object, or undefined when no host is set (email off). The
 * checks that span keys live here: from is required, password and password_file exclude each
 * other, and plain SMTP goes only to this machine, where nobody on the wire can read the
 * password or the mail.
 */
export function resolveSmtp(values: ReadonlyMap<string, ResolvedSetting>): SmtpSettings | undefined {
  const entry = (key: string) => values.get(`notifications.smtp.${key}`)!;
  const get = <T>(key: string) => entry(key).value as T;
  const host = get<string | undefined>('host');
  if (host === undefined) return undefined;
  const invalid = (message: string) => new LicenseServerError('CONFIG_INVALID_VALUE', message);

  const tls = get<SmtpSettings['tls']>('tls');
  if (tls === 'none' && !isLoopbackHost(host)) {
    throw invalid(
      `notifications.smtp.tls is none (from ${entry('tls').source}) but notifications.smtp.host ${JSON.stringify(host)} is not a loopback address; ` +
        'plain SMTP is allowed only to localhost or 127.0.0.1/::1 (use starttls or implicit)',
    );
  }
  const from = get<string | undefined>('from');
  if (from === undefined) {
    throw invalid(`notifications.smtp.from is required when notifications.smtp.host is set (host from ${entry('host').source})`);
  }
  if (mailboxAddress(from) === undefined) {
    throw invalid(`notifications.smtp.from must be an address such as alerts@example.com or "License Server <alerts@example.com>" (from ${entry('from').source})`);
  }
  const password = get<string | undefined>('password');
  const passwordFile = get<string | undefined>('password_file');
  if (password !== undefined && passwordFile !== undefined) {
    throw invalid(
      `both notifications.smtp.password (from ${entry('password').source}) and notifications.smtp.password_file (from ${entry('password_file').source}) are set; give one`,
    );
  }
  const user = get<string | undefined>('user');
  if ((user === undefined) !== (password === undefined && passwordFile === undefined)) {
    throw invalid(
      user === undefined
        ? 'an SMTP password is set but notifications.smtp.user is not; AUTH needs both'
        : `notifications.smtp.user is set (from ${entry('user').source}) but neither notifications.smtp.password nor notifications.smtp.password_file is; AUTH needs both`,
    );
  }
  const caFile = get<string | undefined>('ca_file');
  return {
    host,
    port: get<number | undefined>('port') ?? DEFAULT_PORT[tls],
    tls,
    ...(user === undefined ? {} : { user }),
    ...(password === undefined ? {} : { password }),
    ...(passwordFile === undefined ? {} : { passwordFile }),
    from,
    connectTimeoutSeconds: get<number>('connect_timeout'),
    ...(caFile === undefined ? {} : { caFile }),
  };
}

/** localhost, or a literal address in 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (bare === 'localhost') return true;
  const version = isIP(bare);
  if (version === 4) return bare.startsWith('127.');
  if (version === 6) {
    if (bare === '::1' || bare === '0:0:0:0:0:0:0:1') return true;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
    return mapped !== null && mapped[1]!.startsWith('127.');
  }
  return false;
}
