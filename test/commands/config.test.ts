import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../support/cli.js';

describe('config show', () => {
  let cwd: string;
  before(() => {
    cwd = mkdtempSync(path.join(tmpdir(), 'license-server-config-cli-'));
    mkdirSync(path.join(cwd, 'data'));
    writeFileSync(path.join(cwd, 'data', 'config.yaml'), 'server:\n  port: 9000\nissuer: from-file\n');
  });
  after(() => rmSync(cwd, { recursive: true, force: true }));

  it('prints every setting with its source, secrets redacted, as a table and as JSON', async () => {
    const env = {
      LICENSE_PORT: '9100',
      LICENSE_ADMIN_TOKEN: 'bootstrap-token-0123456789abcdef',
      LICENSE_BACKUP_ENCRYPTION_KEY: 'ab'.repeat(32),
    };
    const human = await runCli(['config', 'show', '--host', '0.0.0.0'], { cwd, env });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, new RegExp(`^config file: ${path.join(cwd, 'data', 'config.yaml')}$`, 'm'));
    assert.match(human.stdout, /^server\.host\s+0\.0\.0\.0\s+flag --host$/m);
    assert.match(human.stdout, /^server\.port\s+9100\s+env LICENSE_PORT$/m);
    assert.match(human.stdout, /^issuer\s+from-file\s+file \/.*config\.yaml$/m);
    assert.match(human.stdout, /^admin_token\s+\[redacted\]\s+env LICENSE_ADMIN_TOKEN$/m);
    const json = await runCli(['config', 'show', '--json'], { cwd, env });
    const shown = json.json();
    assert.equal(shown.settings.find((s: { key: string }) => s.key === 'backup.encryption_key').value, '[redacted]');
    for (const output of [human.stdout, json.stdout]) {
      assert.ok(!output.includes(env.LICENSE_ADMIN_TOKEN) && !output.includes(env.LICENSE_BACKUP_ENCRYPTION_KEY));
    }
  });

  it('fails with one message naming the key and its source', async () => {
    const result = await runCli(['config', 'show'], { cwd, env: { LICENSE_BACKUP_RETENTION_DAYS: 'ten' } });
    assert.equal(result.code, 3);
    assert.equal(
      result.stderr.split('\n')[0],
      'Error: backup.retention_days must be an integer from 1 to 36500, got "ten" (from env LICENSE_BACKUP_RETENTION_DAYS) (CONFIG_INVALID_VALUE)',
    );
  });
});
