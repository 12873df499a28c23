import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeKey, displayEntries, resolveConfig, type ConfigInputs } from '../../../src/lib/config/resolve.js';
import { LicenseServerError } from '../../../src/lib/errors.js';

const KEY_HEX = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff';

describe('configuration', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-server-config-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const resolve = (inputs: Partial<ConfigInputs> = {}) => resolveConfig({ cwd: dir, ...inputs });
  const sourceOf = async (inputs: Partial<ConfigInputs>, key: string) =>
    (await resolve(inputs)).entries.find((entry) => entry.key === key)!.source;

  async function refused(inputs: Partial<ConfigInputs>, code: string, pattern: RegExp): Promise<string> {
    try {
      await resolve(inputs);
    } catch (error) {
      assert.ok(error instanceof LicenseServerError, String(error));
      assert.equal(error.code, code, error.message);
      assert.match(error.message, pattern);
      return error.message;
    }
    assert.fail('expected the configuration to be refused');
  }

  function writeConfig(text: string, name = 'config.yaml'): string {
    const file = path.join(dir, name);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
    return file;
  }

  it('has the documented defaults, relative to the working directory', async () => {
    const { settings, configFile } = await resolve();
    assert.equal(configFile, undefined);
    assert.equal(settings.dataDir, path.join(dir, 'data'));
    assert.equal(settings.database.url, path.join(dir, 'data', 'license-server.db'));
    assert.deepEqual(settings.server, {
      host: '127.0.0.1', port: 8080, tlsCert: undefined, tlsKey: undefined, requestTimeout: 30, clientRateLimit: 10, clientRateBurst: 50, maxConnections: 2048, maxConnectionsPerAddress: 256, restoreWait: 300, metricsHost: '127.0.0.1', metricsPort: undefined, metricsStoreRefresh: 30,
    });
    assert.equal(settings.issuer, 'license-server');
    assert.equal(settings.grace.hours, 72);
    assert.equal(settings.adminToken, undefined);
    assert.deepEqual(settings.backup, {
      enabled: false, schedule: '0 2 * * *', path: path.join(dir, 'data', 'backups'), encryptionKey: undefined, retentionDays: 30, keepDaily: 7, keepWeekly: 4, keepMonthly: 6, targets: [], maxAgeMs: undefined, replication: undefined, drill: { enabled: true, schedule: '30 3 * * *' },
    });
  });

  it('takes flags over LICENSE_* variables over config.yaml over defaults, and says which', async () => {
    const file = writeConfig('server:\n  port: 9000\n  host: 0.0.0.0\ngrace:\n  hours: 24\n');
    const env = { LICENSE_CONFIG: file, LICENSE_PORT: '9100' };
    const config = await resolve({ env, flags: { 'server.port': 9200 } });
    assert.equal(config.settings.server.port, 9200);
    assert.equal(config.settings.server.host, '0.0.0.0');
    assert.equal(config.settings.grace.hours, 24);
    assert.equal(await sourceOf({ env, flags: { 'server.port': 9200 } }, 'server.port'), 'flag --port');
    assert.equal(await sourceOf({ env }, 'server.port'), 'env LICENSE_PORT');
    assert.equal((await resolve({ env })).settings.server.port, 9100);
    assert.equal(await sourceOf({ env: { LICENSE_CONFIG: file } }, 'server.port'), `file ${file}`);
    assert.equal(await sourceOf({ env: { LICENSE_CONFIG: file } }, 'issuer'), 'default');
  });

  it('finds config.yaml in the data directory, or where --config or LICENSE_CONFIG says', async () => {
    mkdirSync(path.join(dir, 'data'));
    writeConfig('issuer: from-data-dir\n', 'data/config.yaml');
    const other = writeConfig('issuer: from-flag\n', 'other.yaml');
    assert.equal((await resolve()).settings.issuer, 'from-data-dir');
    assert.equal((await resolve({ configPath: other })).settings.issuer, 'from-flag');
    assert.equal((await resolve({ env: { LICENSE_CONFIG: other } })).settings.issuer, 'from-flag');
    assert.equal((await resolve({ env: { LICENSE_DATA_DIR: path.join(dir, 'elsewhere') } })).settings.issuer, 'license-server');
  });

  it('resolves relative paths in config.yaml against the file, and others against the working directory', async () => {
    const file = writeConfig('database:\n  url: db/main.db\nbackup:\n  path: ../backups\n', 'etc/config.yaml');
    const config = await resolve({ configPath: file });
    assert.equal(config.settings.database.url, path.join(dir, 'etc', 'db', 'main.db'));
    assert.equal(config.settings.backup.path, path.join(dir, 'backups'));
    const fromEnv = await resolve({ env: { LICENSE_DATABASE_URL: 'sqlite:rel/x.db' } });
    assert.equal(fromEnv.settings.database.url, path.join(dir, 'rel', 'x.db'));
  });

  it('parses booleans, integers and backup keys from the environment', async () => {
    const base64 = Buffer.from(KEY_HEX, 'hex').toString('base64');
    const config = await resolve({
      env: { LICENSE_BACKUP_ENABLED: 'yes', LICENSE_BACKUP_RETENTION_DAYS: '14', LICENSE_BACKUP_ENCRYPTION_KEY: base64 },
    });
    assert.equal(config.settings.backup.enabled, true);
    assert.equal(config.settings.backup.retentionDays, 14);
    assert.equal(config.settings.backup.encryptionKey?.toString('hex'), KEY_HEX);
    assert.equal(decodeKey(KEY_HEX)?.toString('hex'), KEY_HEX);
    assert.equal(decodeKey(Buffer.from(KEY_HEX, 'hex').toString('base64url'))?.toString('hex'), KEY_HEX);
  });

  it('refuses a wrong type or range, naming the key and its source', async () => {
    await refused({ env: { LICENSE_PORT: '80a' } }, 'CONFIG_INVALID_VALUE', /^server\.port must be an integer from 0 to 65535, got "80a" \(from env LICENSE_PORT\)$/);
    await refused({ env: { LICENSE_PORT: '70000' } }, 'CONFIG_INVALID_VALUE', /server\.port/);
    await refused({ env: { LICENSE_GRACE_HOURS: '0' } }, 'CONFIG_INVALID_VALUE', /grace\.hours .*env LICENSE_GRACE_HOURS/);
    await refused({ env: { LICENSE_BACKUP_ENABLED: 'maybe' } }, 'CONFIG_INVALID_VALUE', /backup\.enabled must be true or false/);
    const file = writeConfig('server:\n  port: "8080"\n');
    await refused({ configPath: file }, 'CONFIG_INVALID_VALUE', new RegExp(`server\\.port .*\\(from file ${file}\\)`));
    const nested = writeConfig('backup: 3\n');
    await refused({ configPath: nested }, 'CONFIG_INVALID_VALUE', /backup must be a mapping/);
    await refused({ env: { LICENSE_DATABASE_URL: 'mysql://localhost/x' } }, 'CONFIG_INVALID_VALUE', /database\.url/);
    await refused({ env: { LICENSE_ADMIN_TOKEN: 'short' } }, 'CONFIG_INVALID_VALUE', /admin_token must be at least 24 characters/);
  });

  it('shows at most a short, escaped prefix of a bad value or an unknown key', async () => {
    const long = await refused({ configPath: writeConfig(`server:\n  port: "${'8'.repeat(100_000)}"\n`) }, 'CONFIG_INVALID_VALUE', /server\.port/);
    const list = await refused({ configPath: writeConfig(`issuer: [${new Array(50_000).fill('1').join(', ')}]\n`) }, 'CONFIG_INVALID_VALUE', /issuer .*an array \(50000 elements\)/);
    const escaped = await refused({ env: { LICENSE_PORT: '\u001b[2J\u202e'.repeat(1000) } }, 'CONFIG_INVALID_VALUE', /server\.port/);
    const unknown = await refused({ configPath: writeConfig(`${'no such key '.repeat(80)}x: 1\n`) }, 'CONFIG_UNKNOWN_KEY', /unknown key "(no such key ){3}no s\.\.\." \(961 characters\)/);
    for (const message of [long, list, escaped, unknown].map((text) => text.replace(/ \(known keys: [^)]*\)/, ''))) {
      assert.ok(!/[\u0000-\u001f\u007f-\uffff]/.test(message), message.slice(0, 200));
      assert.ok(message.length < 250, `${message.length} characters: ${message.slice(0, 200)}`);
    }
  });

  it('refuses a backup key that is not 32 bytes, without showing it', async () => {
    for (const key of ['00112233', `${KEY_HEX}00`, 'not-a-key-at-all', Buffer.alloc(31, 7).toString('base64'), Buffer.alloc(33, 7).toString('base64')]) {
      const message = await refused({ env: { LICENSE_BACKUP_ENCRYPTION_KEY: key } }, 'CONFIG_INVALID_VALUE', /^backup\.encryption_key must be 32 bytes/);
      assert.ok(!message.includes(key), message);
      assert.match(message, /env LICENSE_BACKUP_ENCRYPTION_KEY/);
    }
  });

  it('refuses unknown keys, malformed YAML, non-mappings and unreadable files', async () => {
    const unknown = writeConfig('server:\n  prot: 8080\n');
    await refused({ configPath: unknown }, 'CONFIG_UNKNOWN_KEY', new RegExp(`unknown key "server\\.prot" in ${unknown} \\(known keys: server\\.host, server\\.port, server\\.tls_cert, `));
    await refused({ configPath: writeConfig('colour: blue\n', 'b.yaml') }, 'CONFIG_UNKNOWN_KEY', /"colour"/);
    const malformed = writeConfig('server:\n  port: [8080\nbackup:\n  encryption_key: s3cr3t-value\n', 'c.yaml');
    const message = await refused({ configPath: malformed }, 'CONFIG_PARSE_ERROR', /^malformed YAML in .*c\.yaml at line \d+, column \d+: /);
    assert.ok(!message.includes('s3cr3t-value'), 'the file text is never quoted');
    await refused({ configPath: writeConfig('a: 1\na: 2\n', 'd.yaml') }, 'CONFIG_PARSE_ERROR', /malformed YAML/);
    await refused({ configPath: writeConfig('- just\n- a list\n', 'e.yaml') }, 'CONFIG_PARSE_ERROR', /must hold a YAML mapping/);
    await refused({ configPath: path.join(dir, 'missing.yaml') }, 'CONFIG_FILE_UNREADABLE', /missing\.yaml \(from flag --config\): no such file/);
    await refused({ env: { LICENSE_CONFIG: dir } }, 'CONFIG_FILE_UNREADABLE', /from env LICENSE_CONFIG/);
    if (process.getuid?.() !== 0) {
      const locked = writeConfig('issuer: x\n', 'f.yaml');
      chmodSync(locked, 0o000);
      await refused({ configPath: locked }, 'CONFIG_FILE_UNREADABLE', /permission denied/);
    }
  });

  it('refuses a backup schedule that is not a cron expression, naming the key', async () => {
    await refused({ env: { LICENSE_BACKUP_SCHEDULE: 'every night' } }, 'CONFIG_INVALID_VALUE', /^backup\.schedule must be a cron expression/);
    await refused({ env: { LICENSE_BACKUP_SCHEDULE: '61 2 * * *' } }, 'CONFIG_INVALID_VALUE', /^backup\.schedule \(from env LICENSE_BACKUP_SCHEDULE\) is not a valid cron expression/);
    assert.equal((await resolve({ env: { LICENSE_BACKUP_SCHEDULE: '30 3 * * 1-5' } })).settings.backup.schedule, '30 3 * * 1-5');
  });

  it('refuses half a TLS configuration, naming both keys', async () => {
    await refused({ env: { LICENSE_TLS_CERT: 'cert.pem' } }, 'CONFIG_INVALID_VALUE', /^server\.tls_cert is set \(from env LICENSE_TLS_CERT\) but server\.tls_key is not/);
    const both = await resolve({ env: { LICENSE_TLS_CERT: 'cert.pem', LICENSE_TLS_KEY: 'key.pem' } });
    assert.equal(both.settings.server.tlsKey, path.join(dir, 'key.pem'));
  });

  it('accepts an empty file and empty sections', async () => {
    assert.equal((await resolve({ configPath: writeConfig('') })).settings.server.port, 8080);
    assert.equal((await resolve({ configPath: writeConfig('backup:\n', 'g.yaml') })).settings.backup.enabled, false);
  });

  it('shows secrets redacted and hides URL passwords', async () => {
    const config = await resolve({
      env: {
        LICENSE_ADMIN_TOKEN: 'admin-token-secret-value-123',
        LICENSE_BACKUP_ENCRYPTION_KEY: KEY_HEX,
        LICENSE_DATABASE_URL: 'postgres://app:pa55word@db.example:5432/licenses?password=other-secret',
      },
    });
    const shown = displayEntries(config);
    const text = JSON.stringify(shown);
    for (const secret of ['admin-token-secret-value-123', KEY_HEX, 'pa55word', 'other-secret']) assert.ok(!text.includes(secret), secret);
    assert.equal(shown.find((e) => e.key === 'admin_token')!.value, '[redacted]');
    assert.equal(shown.find((e) => e.key === 'database.url')!.value, 'postgres://app:***@db.example:5432/licenses?password=***');
    assert.equal(shown.find((e) => e.key === 'backup.encryption_key')!.source, 'env LICENSE_BACKUP_ENCRYPTION_KEY');
  });
});
