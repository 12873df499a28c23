import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { displayEntries, resolveConfig } from '../../../../src/lib/config/resolve.js';
import { LicenseServerError } from '../../../../src/lib/errors.js';

const FINGERPRINT = 'SHA256:Wn0dD3OG6M1jy3pV5dDFgqO1XS5gYq6Jk8P2rJ5mL8Q';

/** backup.targets in config.yaml and LICENSE_BACKUP_TARGETS (docs/configuration.md, "Off-site targets"). */
describe('backup.targets', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-server-targets-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const withFile = (yaml: string) => {
    const file = path.join(dir, 'config.yaml');
    writeFileSync(file, yaml);
    return resolveConfig({ cwd: dir, configPath: file });
  };
  async function refused(work: Promise<unknown>, code: string, pattern: RegExp): Promise<string> {
    try {
      await work;
    } catch (error) {
      assert.ok(error instanceof LicenseServerError, String(error));
      assert.equal(error.code, code, error.message);
      assert.match(error.message, pattern);
      return error.message;
    }
    assert.fail('expected the configuration to be refused');
  }

  it('reads the three kinds from config.yaml with their defaults, paths relative to the file', async () => {
    const { settings } = await withFile(`
backup:
  targets:
    - { name: nas, kind: file, path: nas-mount }
    - name: offsite
      kind: s3
      bucket: acme-backups
      prefix: /prod/
      endpoint: http://127.0.0.1:9000/
      path_style: true
      secret_access_key_file: secret
    - name: vault
      kind: sftp
      host: backup.example.net
      user: lic
      path: /srv/backups/
      private_key_file: /etc/ls/key
      host_key_fingerprint: ${FINGERPRINT}
`);
    const [nas, offsite, vault] = settings.backup.targets;
    assert.deepEqual(nas, { name: 'nas', kind: 'file', path: path.join(dir, 'nas-mount'), allowUnencrypted: false, timeoutSeconds: 30, retention: {} });
    assert.equal(offsite?.kind, 's3');
    if (offsite?.kind === 's3') {
      assert.equal(offsite.prefix, 'prod');
      assert.equal(offsite.endpoint, 'http://127.0.0.1:9000');
      assert.equal(offsite.region, 'us-east-1');
      assert.deepEqual(offsite.accessKeyId, { env: 'AWS_ACCESS_KEY_ID' });
      assert.deepEqual(offsite.secretAccessKey, { file: path.join(dir, 'secret') });
      assert.equal(offsite.partSizeMiB, 16);
    }
    assert.equal(vault?.kind, 'sftp');
    if (vault?.kind === 'sftp') {
      assert.equal(vault.port, 22);
      assert.equal(vault.path, '/srv/backups');
      assert.deepEqual(vault.hostKeyFingerprints, [FINGERPRINT]);
    }
  });

  it('takes the list as JSON from LICENSE_BACKUP_TARGETS over the file', async () => {
    const file = path.join(dir, 'config.yaml');
    writeFileSync(file, 'backup:\n  targets:\n    - { name: nas, kind: file, path: /mnt/a }\n');
    const { settings, entries } = await resolveConfig({
      cwd: dir,
      configPath: file,
      env: { LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'offsite', kind: 's3', bucket: 'acme-backups', keep_daily: 14 }]) },
    });
    assert.deepEqual(settings.backup.targets.map((target) => [target.name, target.retention]), [['offsite', { keepDaily: 14 }]]);
    assert.equal(entries.find((entry) => entry.key === 'backup.targets')?.source, 'env LICENSE_BACKUP_TARGETS');
    await refused(resolveConfig({ cwd: dir, env: { LICENSE_BACKUP_TARGETS: '[{name: nas' } }), 'CONFIG_INVALID_VALUE', /JSON/);
  });

  it('refuses a credential written in the list, and shows none of it', async () => {
    const message = await refused(
      withFile('backup:\n  targets:\n    - { name: offsite, kind: s3, bucket: acme-backups, secret_access_key: wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY }\n'),
      'CONFIG_INVALID_VALUE',
      /secret_access_key may not be written.*secret_access_key_env.*secret_access_key_file/,
    );
    assert.doesNotMatch(message, /wJalr/);
    await refused(withFile('backup:\n  targets:\n    - { name: v, kind: sftp, host: h, user: u, path: /x, private_key_file: /k, password: hunter2hunter2, host_key_fingerprint: ' + FINGERPRINT + ' }\n'),
      'CONFIG_INVALID_VALUE', /password may not be written/);
  });

  it('refuses an SFTP target without a pinned host key: an unknown key is never accepted', async () => {
    await refused(withFile('backup:\n  targets:\n    - { name: vault, kind: sftp, host: h, user: u, path: /srv, private_key_file: /k }\n'),
      'CONFIG_INVALID_VALUE', /host_key_fingerprint.*known_hosts_file/);
    await refused(withFile('backup:\n  targets:\n    - { name: vault, kind: sftp, host: h, user: u, path: /srv, private_key_file: /k, host_key_fingerprint: "MD5:aa:bb" }\n'),
      'CONFIG_INVALID_VALUE', /SHA256/);
    await refused(withFile(`backup:\n  targets:\n    - { name: vault, kind: sftp, host: h, user: u, path: /srv, private_key_file: /k, host_key_fingerprint: "${FINGERPRINT}", known_hosts_file: /kh }\n`),
      'CONFIG_INVALID_VALUE', /one way, host_key_fingerprint or known_hosts_file, not both/);
  });

  it('refuses unknown keys, duplicate names, bad names and kinds, and bad values, naming the target', async () => {
    await refused(withFile('backup:\n  targets:\n    - { name: nas, kind: file, path: /m, bukket: x }\n'), 'CONFIG_UNKNOWN_KEY', /backup\.targets nas: unknown key "bukket"/);
    await refused(withFile('backup:\n  targets:\n    - { name: nas, kind: file, path: /a }\n    - { name: nas, kind: file, path: /b }\n'), 'CONFIG_INVALID_VALUE', /names nas twice/);
    await refused(withFile('backup:\n  targets:\n    - { name: "Bad Name", kind: file, path: /a }\n'), 'CONFIG_INVALID_VALUE', /targets\[0\]\.name/);
    await refused(withFile('backup:\n  targets:\n    - { name: x, kind: ftp }\n'), 'CONFIG_INVALID_VALUE', /kind must be file, s3 or sftp/);
    await refused(withFile('backup:\n  targets:\n    - { name: x, kind: s3, bucket: B }\n'), 'CONFIG_INVALID_VALUE', /bucket must be a valid S3 bucket name/);
    await refused(withFile('backup:\n  targets:\n    - { name: x, kind: s3, bucket: abc, endpoint: "https://key:secret@s3.example.com" }\n'), 'CONFIG_INVALID_VALUE', /endpoint/);
    await refused(withFile('backup:\n  targets:\n    - { name: x, kind: file }\n'), 'CONFIG_INVALID_VALUE', /path is required/);
    await refused(withFile('backup:\n  targets:\n    - { name: x, kind: file, path: /a, timeout: 0 }\n'), 'CONFIG_INVALID_VALUE', /timeout must be an integer from 1 to 3600/);
    await refused(withFile('backup:\n  targets: { name: x }\n'), 'CONFIG_INVALID_VALUE', /must be a list/);
  });

  it('shows in config show as kind and place, never a credential source\'s content', async () => {
    const config = await withFile(`
backup:
  targets:
    - { name: offsite, kind: s3, bucket: acme-backups, prefix: prod, endpoint: "https://s3.example.com", secret_access_key_env: MY_SECRET }
    - { name: vault, kind: sftp, host: h.example, user: lic, path: /srv, private_key_file: /k, host_key_fingerprint: "${FINGERPRINT}" }
`);
    const shown = displayEntries(config).find((entry) => entry.key === 'backup.targets');
    assert.equal(shown?.value, 'offsite: s3://acme-backups/prod at https://s3.example.com; vault: sftp://lic@h.example:22/srv');
  });

  it('shows allow_unencrypted in config show: it decides what a restore takes from the target (issue 35, item 1)', async () => {
    const config = await withFile('backup:\n  targets:\n    - { name: nas, kind: file, path: /mnt/nas, allow_unencrypted: true }\n    - { name: strict, kind: file, path: /mnt/strict }\n');
    const shown = displayEntries(config).find((entry) => entry.key === 'backup.targets');
    assert.equal(shown?.value, 'nas: file /mnt/nas (allow_unencrypted: unencrypted backups are copied there and restored from there); strict: file /mnt/strict');
  });
});

describe('docs/configuration.md, "Off-site targets"', () => {
  it('gives an example that the configuration reads as it says', async () => {
    const doc = (await import('node:fs')).readFileSync(new URL('../../../../docs/configuration.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('## Off-site targets'));
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const dir = mkdtempSync(path.join(tmpdir(), 'license-server-targets-doc-'));
    try {
      writeFileSync(path.join(dir, 'config.yaml'), yaml);
      const { settings } = await resolveConfig({ cwd: dir, configPath: path.join(dir, 'config.yaml') });
      assert.deepEqual(settings.backup.targets.map((target) => `${target.name}:${target.kind}`), ['nas:file', 'offsite:s3', 'vault:sftp']);
      const json = /LICENSE_BACKUP_TARGETS='([^']+)'/.exec(section)![1]!;
      const fromEnv = await resolveConfig({ cwd: dir, env: { LICENSE_BACKUP_TARGETS: json } });
      assert.deepEqual(fromEnv.settings.backup.targets.map((target) => target.name), ['offsite']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
