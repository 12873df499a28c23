import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { startS3ServerOrSkip, type S3TestServer } from '../support/s3-server.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

/**
 * Issue 35, item 10: an S3 target whose connections are reset (a middlebox, a server that
 * drops its flows) is unreachable, as an SFTP target's are, not "timeout": the AWS SDK names
 * a reset a TimeoutError, which the target must not pass on as the reason.
 */
forEachEngine('backups to an S3 target whose connections are reset', (fixture) => {
  let work: string;
  let s3: S3TestServer;
  let proxy: TcpProxy;
  before(async function () {
    this.timeout(30_000);
    s3 = await startS3ServerOrSkip(this);
    await s3.createBucket('backups');
    proxy = await startTcpProxy(s3.endpoint.slice('http://'.length));
    work = mkdtempSync(path.join(tmpdir(), 'license-s3-resets-'));
  });
  after(async () => {
    await proxy?.close();
    await s3?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('names the reset "unreachable" in the summary line and in backup status --json, never "timeout"', async function () {
    this.timeout(120_000);
    const config = path.join(work, `config-${fixture.engine}.yaml`);
    writeFileSync(config, stringify({
      backup: {
        targets: [{
          name: 'offsite', kind: 's3', endpoint: `http://${proxy.addr}`, region: s3.region, bucket: 'backups', prefix: fixture.engine, path_style: true,
          timeout: 5, access_key_id_env: 'TEST_S3_KEY_ID', secret_access_key_env: 'TEST_S3_SECRET',
        }],
      },
    }));
    const env = {
      LICENSE_DATABASE_URL: await fixture.freshUrl(),
      LICENSE_CONFIG: config,
      LICENSE_BACKUP_PATH: path.join(work, `backups-${fixture.engine}`),
      LICENSE_BACKUP_ENCRYPTION_KEY: 'b4'.repeat(32),
      TEST_S3_KEY_ID: s3.credentials.accessKeyId,
      TEST_S3_SECRET: s3.credentials.secretAccessKey,
    };
    const cli = (...args: string[]) => runCli(args, { env, cwd: work });
    assert.equal((await cli('init')).code, 0);
    proxy.resetting(true);
    try {
      const created = await cli('backup', 'create');
      assert.equal(created.code, 16, `${created.stdout}\n${created.stderr}`);
      assert.match(created.stdout, /NOT copied to offsite \(unreachable: target offsite: .*ECONNRESET/, created.stdout);
      assert.doesNotMatch(created.stdout, /timeout/i);
      const status = await cli('backup', 'status', '--place', 'offsite', '--json');
      assert.equal(status.code, 0, status.stderr);
      const [offsite] = status.json();
      assert.deepEqual(
        [offsite.unreachable_reason, offsite.last_error_reason],
        ['unreachable', 'unreachable'],
        JSON.stringify(offsite),
      );
      assert.match(offsite.unreachable, /ECONNRESET/);
      assert.match(offsite.last_error, /ECONNRESET/);
      assert.doesNotMatch(`${offsite.unreachable} ${offsite.last_error}`, /timeout/i);
      // The table names the reason as the summary line does.
      const table = await cli('backup', 'status', '--place', 'offsite');
      assert.match(table.stdout, /unreachable: target offsite: list: .*ECONNRESET/, table.stdout);
    } finally {
      proxy.resetting(false);
    }
  });
});
