import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { replicationFixture, type S3Replica } from '../support/replication.js';
import { startS3ServerOrSkip, type S3TestServer } from '../support/s3-server.js';
import { api, killAllServes, startServe, type ServeProcess } from '../support/serve.js';
import { findLitestream } from '../../src/lib/replication/litestream-binary.js';

/**
 * Issue 37, Deliver 1: replication to an s3 target, the S3 test server standing for the
 * bucket (every request's SigV4 signature checked), read back by Litestream's own restore
 * as docs/replication.md tells an operator without this tool.
 */
describe('continuous replication to an s3 target [sqlite]', function () {
  let work: string;
  let litestream: string;
  let s3: S3TestServer;
  const { backupKey, caughtUp, databaseOf, gone, restoreByHand, column } = replicationFixture({ work: () => work, litestream: () => litestream });

  before(async function () {
    litestream = (await findLitestream(undefined)).binary;
    s3 = await startS3ServerOrSkip(this);
    await s3.createBucket('backups');
  });
  after(async () => s3?.stop());
  beforeEach(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-replication-s3-'));
  });
  afterEach(() => {
    killAllServes();
    rmSync(work, { recursive: true, force: true });
  });

  const createCustomer = async (serve: ServeProcess, name: string) => assert.equal((await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name } })).status, 201);

  it('replicates each acknowledged write, encrypted, signed with the target\'s key; Litestream restores them from the bucket, and from a moment between two writes', async function () {
    this.timeout(120_000);
    const replica: S3Replica = { endpoint: s3.endpoint, region: s3.region, bucket: 'backups', prefix: 'license', ...s3.credentials };
    const config = path.join(work, 'config.yaml');
    writeFileSync(config, stringify({
      backup: {
        targets: [{ name: 'offsite', kind: 's3', endpoint: replica.endpoint, region: replica.region, bucket: replica.bucket, prefix: replica.prefix, path_style: true, access_key_id_env: 'TEST_S3_KEY_ID', secret_access_key_env: 'TEST_S3_SECRET' }],
        replication: { targets: ['offsite'] },
      },
    }));
    const serve = await startServe({ LICENSE_CONFIG: config, LICENSE_BACKUP_ENCRYPTION_KEY: backupKey.toString('hex'), TEST_S3_KEY_ID: replica.accessKeyId, TEST_S3_SECRET: replica.secretAccessKey });
    await createCustomer(serve, 'Ada');
    const first = await caughtUp(serve);
    const moment = new Date(Math.ceil((Date.now() + 1000) / 1000) * 1000);
    await new Promise((resolve) => setTimeout(resolve, moment.getTime() - Date.now() + 1500));
    await createCustomer(serve, 'Bea');
    await caughtUp(serve);
    const uploads = s3.requests.filter((seen) => seen.operation === 'PutObject' && seen.key?.startsWith('license/replica/generations/'));
    assert.ok(uploads.some((seen) => /\/snapshots\/[0-9a-f]{8}\.snapshot\.lz4$/.test(seen.key!)) && uploads.some((seen) => /\/wal\/[0-9a-f]{8}_[0-9a-f]{8}\.wal\.lz4$/.test(seen.key!)), uploads.map((seen) => seen.key).join('\n'));
    assert.ok(uploads.every((seen) => seen.status === 200), 'every upload passed the signature check');
    const databasePath = databaseOf(serve);
    await serve.stop('SIGKILL');
    await gone(first.pid, 'Litestream, after serve was killed');
    rmSync(path.dirname(databasePath), { recursive: true, force: true });
    assert.deepEqual(await column(await restoreByHand(databasePath, undefined, replica), 'SELECT name FROM customers ORDER BY name'), ['Ada', 'Bea']);
    assert.deepEqual(await column(await restoreByHand(databasePath, moment.toISOString(), replica), 'SELECT name FROM customers ORDER BY name'), ['Ada']);
  });
});
