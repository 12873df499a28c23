import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { displayEntries, resolveConfig, type ConfigInputs } from '../../../src/lib/config/resolve.js';
import { isLoopbackHost } from '../../../src/lib/config/smtp.js';
import { LicenseServerError } from '../../../src/lib/errors.js';

const SMTP = {
  LICENSE_NOTIFICATIONS_SMTP_HOST: 'smtp.example.com',
  LICENSE_NOTIFICATIONS_SMTP_FROM: 'licenses@example.com',
};

describe('configuration: notifications (SMTP and the outbox)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-server-config-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const resolve = (inputs: Partial<ConfigInputs> = {}) => resolveConfig({ cwd: dir, ...inputs });
  const settingsOf = async (env: Record<string, string>) => (await resolve({ env })).settings.notifications;

  async function refused(env: Record<string, string>, pattern: RegExp, inputs: Partial<ConfigInputs> = {}): Promise<string> {
    try {
      await resolve({ env, ...inputs });
    } catch (error) {
      assert.ok(error instanceof LicenseServerError, String(error));
      assert.equal(error.code, 'CONFIG_INVALID_VALUE', error.message);
      assert.match(error.message, pattern);
      return error.message;
    }
    assert.fail('expected the configuration to be refused');
  }

  it('has email off and the documented outbox defaults', async () => {
    assert.deepEqual(await settingsOf({}), {
      allowLinkLocal: false,
      smtp: undefined,
      retry: { firstDelaySeconds: 30, maxDelaySeconds: 3600, giveUpHours: 24 },
      pruneAfterDays: 30,
      expiringSoonDays: [30, 7, 1],
    });
  });

  it('resolves an SMTP relay, with the port following the TLS mode', async () => {
    assert.deepEqual((await settingsOf(SMTP)).smtp, {
      host: 'smtp.example.com', port: 587, tls: 'starttls', from: 'licenses@example.com', connectTimeoutSeconds: 10,
    });
    assert.equal((await settingsOf({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_TLS: 'implicit' })).smtp!.port, 465);
    assert.equal((await settingsOf({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_HOST: 'localhost', LICENSE_NOTIFICATIONS_SMTP_TLS: 'none' })).smtp!.port, 25);
    const full = await settingsOf({
      ...SMTP,
      LICENSE_NOTIFICATIONS_SMTP_PORT: '2525',
      LICENSE_NOTIFICATIONS_SMTP_TLS: 'IMPLICIT',
      LICENSE_NOTIFICATIONS_SMTP_USER: 'mailer',
      LICENSE_NOTIFICATIONS_SMTP_PASSWORD_FILE: 'secrets/smtp',
      LICENSE_NOTIFICATIONS_SMTP_FROM: 'License Server <licenses@example.com>',
      LICENSE_NOTIFICATIONS_SMTP_CONNECT_TIMEOUT: '3',
      LICENSE_NOTIFICATIONS_SMTP_CA_FILE: 'ca.pem',
    });
    assert.deepEqual(full.smtp, {
      host: 'smtp.example.com', port: 2525, tls: 'implicit', user: 'mailer', passwordFile: path.join(dir, 'secrets/smtp'),
      from: 'License Server <licenses@example.com>', connectTimeoutSeconds: 3, caFile: path.join(dir, 'ca.pem'),
    });
  });

  it('reads nested sections and a list of days from config.yaml', async () => {
    const file = path.join(dir, 'config.yaml');
    writeFileSync(file, [
      'notifications:',
      '  smtp:',
      '    host: smtp.example.com',
      '    port: 25',
      '    user: mailer',
      '    password: from-the-file-0123',
      '    from: licenses@example.com',
      '  retry_first_delay: 5',
      '  give_up_after: 48',
      '  expiring_soon_days: [1, 14, 60]',
      '',
    ].join('\n'));
    const notifications = (await resolve({ configPath: file })).settings.notifications;
    assert.deepEqual(notifications.smtp, {
      host: 'smtp.example.com', port: 25, tls: 'starttls', user: 'mailer', password: 'from-the-file-0123', from: 'licenses@example.com', connectTimeoutSeconds: 10,
    });
    assert.deepEqual(notifications.retry, { firstDelaySeconds: 5, maxDelaySeconds: 3600, giveUpHours: 48 });
    assert.deepEqual(notifications.expiringSoonDays, [60, 14, 1]);
    writeFileSync(file, 'notifications:\n  smtp:\n    hots: smtp.example.com\n');
    await assert.rejects(resolve({ configPath: file }), (error: LicenseServerError) => error.code === 'CONFIG_UNKNOWN_KEY' && /"notifications\.smtp\.hots"/.test(error.message));
    writeFileSync(file, 'notifications:\n  smtp: smtp.example.com\n');
    await assert.rejects(resolve({ configPath: file }), /notifications\.smtp must be a mapping of settings/);
  });

  it('refuses plain SMTP to anything but a loopback host', async () => {
    for (const host of ['smtp.example.com', '10.0.0.5', '::ffff:10.0.0.5', 'localhost.example.com', '127.0.0.1.nip.io']) {
      await refused({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_HOST: host, LICENSE_NOTIFICATIONS_SMTP_TLS: 'none' },
        /^notifications\.smtp\.tls is none \(from env LICENSE_NOTIFICATIONS_SMTP_TLS\) but notifications\.smtp\.host .* is not a loopback address/);
    }
    for (const host of ['localhost', 'LOCALHOST', '127.0.0.1', '127.1.2.3', '::1', '[::1]', '::ffff:127.0.0.1']) {
      assert.equal(isLoopbackHost(host), true, host);
      assert.equal((await settingsOf({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_HOST: host, LICENSE_NOTIFICATIONS_SMTP_TLS: 'none' })).smtp!.tls, 'none');
    }
    await refused({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_TLS: 'ssl' }, /^notifications\.smtp\.tls must be one of starttls, implicit, none, got "ssl"/);
  });

  it('requires a From address with the host, and one that is an address', async () => {
    await refused({ LICENSE_NOTIFICATIONS_SMTP_HOST: 'smtp.example.com' },
      /^notifications\.smtp\.from is required when notifications\.smtp\.host is set \(host from env LICENSE_NOTIFICATIONS_SMTP_HOST\)$/);
    for (const from of ['licenses', 'a@example.com, b@example.com', 'Name <a@example.com', 'a@example.com\r\nBcc: b@example.com']) {
      await refused({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_FROM: from }, /^notifications\.smtp\.from must be an address/);
    }
    // Without a host the other keys are inert: email is simply off.
    assert.equal((await settingsOf({ LICENSE_NOTIFICATIONS_SMTP_USER: 'mailer' })).smtp, undefined);
  });

  it('takes the password or a password file, not both, and never with a user missing', async () => {
    const secret = 'Very-Secret-SMTP-Password-42';
    const both = await refused({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_USER: 'mailer', LICENSE_NOTIFICATIONS_SMTP_PASSWORD: secret, LICENSE_NOTIFICATIONS_SMTP_PASSWORD_FILE: 'pw' },
      /^both notifications\.smtp\.password \(from env LICENSE_NOTIFICATIONS_SMTP_PASSWORD\) and notifications\.smtp\.password_file \(from env LICENSE_NOTIFICATIONS_SMTP_PASSWORD_FILE\) are set/);
    assert.ok(!both.includes(secret));
    const noUser = await refused({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_PASSWORD: secret }, /notifications\.smtp\.user is not/);
    assert.ok(!noUser.includes(secret));
    await refused({ ...SMTP, LICENSE_NOTIFICATIONS_SMTP_USER: 'mailer' }, /neither notifications\.smtp\.password nor notifications\.smtp\.password_file/);
    const config = await resolve({ env: { ...SMTP, LICENSE_NOTIFICATIONS_SMTP_USER: 'mailer', LICENSE_NOTIFICATIONS_SMTP_PASSWORD: secret } });
    assert.equal(config.settings.notifications.smtp!.password, secret);
    const shown = displayEntries(config);
    assert.ok(!JSON.stringify(shown).includes(secret));
    assert.equal(shown.find((entry) => entry.key === 'notifications.smtp.password')!.value, '[redacted]');
  });

  it('checks the ranges of the timeouts and of the retry schedule', async () => {
    await refused({ LICENSE_NOTIFICATIONS_SMTP_CONNECT_TIMEOUT: '0' }, /^notifications\.smtp\.connect_timeout must be an integer from 1 to 300/);
    await refused({ LICENSE_NOTIFICATIONS_SMTP_PORT: '0' }, /^notifications\.smtp\.port must be an integer from 1 to 65535/);
    await refused({ LICENSE_NOTIFICATIONS_GIVE_UP_AFTER: '721' }, /^notifications\.give_up_after must be an integer from 1 to 720/);
    await refused({ LICENSE_NOTIFICATIONS_RETRY_FIRST_DELAY: '0' }, /^notifications\.retry_first_delay /);
    await refused({ LICENSE_NOTIFICATIONS_PRUNE_AFTER_DAYS: '0' }, /^notifications\.prune_after_days /);
  });

  it('takes expiring_soon_days as distinct whole days 1-365, sorted descending, and refuses anything else', async () => {
    assert.deepEqual((await settingsOf({ LICENSE_NOTIFICATIONS_EXPIRING_SOON_DAYS: ' 3, 90 ,14' })).expiringSoonDays, [90, 14, 3]);
    assert.deepEqual((await settingsOf({ LICENSE_NOTIFICATIONS_EXPIRING_SOON_DAYS: '365' })).expiringSoonDays, [365]);
    for (const bad of ['0', '366', '7,7', '30,7,', 'seven', '1.5', '-1', '30;7', '30 7']) {
      await refused({ LICENSE_NOTIFICATIONS_EXPIRING_SOON_DAYS: bad },
        /^notifications\.expiring_soon_days must be distinct whole days from 1 to 365, comma-separated, such as "30,7,1", got .* \(from env LICENSE_NOTIFICATIONS_EXPIRING_SOON_DAYS\)$/);
    }
  });
});
