import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import { CreateMultipartUploadCommand, ListMultipartUploadsCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { openS3Target, type S3TargetOptions } from '../../../../src/lib/backup/targets/s3.js';
import { isTargetError, type BackupTarget, type TargetError } from '../../../../src/lib/backup/targets/target.js';
import { startBlackHole } from '../../../support/black-hole.js';
import { startTcpProxy } from '../../../support/tcp-proxy.js';
import { NodeSha256, startBrokenBodyServer, startGarbageServer, startS3ServerOrSkip, startSilentServer, unusedEndpoint, type S3TestServer } from '../../../support/s3-server.js';
import { chunked, failure, readAll, sha256, targetContract } from './contract.js';

const MIB = 1024 * 1024;
const PREFIX = 'license-server/prod';
let counter = 0;

/** A bucket name of its own for each case: DNS-safe, so that virtual-host addressing can take it. */
function bucketName(): string {
  counter += 1;
  return `backups-${counter}-${randomBytes(3).toString('hex')}`;
}

async function targetFailure(work: Promise<unknown>): Promise<TargetError> {
  try {
    await work;
  } catch (error) {
    assert.ok(isTargetError(error), `expected a TargetError, got ${inspect(error)}`);
    return error;
  }
  assert.fail('expected the target to fail');
}

describe('the s3 target (lib/backup/targets/s3.ts) against s3rver behind a SigV4-checking front', function () {
  this.timeout(120_000);
  let s3: S3TestServer;
  /** The tests' own view of the store, through the SDK but not through the target. */
  let direct: S3Client;
  const opened: BackupTarget[] = [];

  before(async function () {
    this.timeout(30_000);
    s3 = await startS3ServerOrSkip(this);
    direct = new S3Client({
      endpoint: s3.endpoint,
      region: s3.region,
      credentials: s3.credentials,
      forcePathStyle: true,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  });
  afterEach(async () => {
    for (const target of opened.splice(0)) await target.close();
  });
  after(async () => {
    direct?.destroy();
    await s3?.stop();
  });

  const options = (overrides: Partial<S3TargetOptions> = {}): S3TargetOptions => ({
    name: 'offsite',
    endpoint: s3.endpoint,
    region: s3.region,
    bucket: 'unset',
    prefix: PREFIX,
    pathStyle: true,
    credentials: s3.credentials,
    timeoutSeconds: 5,
    partSize: 5 * MIB,
    ...overrides,
  });
  const open = (overrides: Partial<S3TargetOptions> = {}): BackupTarget => {
    const target = openS3Target(options(overrides));
    opened.push(target);
    return target;
  };

  /** Every object and every incomplete multipart upload (`upload:<key>`) under the prefix. */
  const raw = async (bucket: string, prefix = PREFIX): Promise<string[]> => {
    const root = `${prefix}/`;
    const names: string[] = [];
    let token: string | undefined;
    do {
      const page = await direct.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: root, ContinuationToken: token }));
      names.push(...(page.Contents ?? []).map(({ Key }) => Key!.slice(root.length)));
      token = page.NextContinuationToken;
    } while (token);
    const uploads = await direct.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: root }));
    names.push(...(uploads.Uploads ?? []).map(({ Key }) => `upload:${Key!.slice(root.length)}`));
    return names.sort();
  };

  /** A fresh bucket with objects beside the prefix that the target must never see. */
  const freshBucket = async (): Promise<string> => {
    const bucket = bucketName();
    await s3.createBucket(bucket);
    for (const Key of [`${PREFIX}-archive/20261101T000000000Z-aaaaaa.backup.json`, `${PREFIX}.backup.json`, 'other.backup.json']) {
      await direct.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Buffer.from('{}') }));
    }
    return bucket;
  };

  targetContract('s3', async () => {
    const bucket = await freshBucket();
    return { target: openS3Target(options({ bucket })), raw: () => raw(bucket) };
  });

  describe('S3 specifics', () => {
    it('names its place without credentials: s3://bucket/prefix at the endpoint', () => {
      const target = open({ bucket: 'backups', endpoint: 'https://user:hunter2@s3.example.test:9000/' });
      assert.equal(target.kind, 's3');
      assert.equal(target.location, 's3://backups/license-server/prod at https://s3.example.test:9000');
      assert.equal(open({ bucket: 'backups', prefix: '', endpoint: undefined }).location, 's3://backups');
    });

    it('addresses the bucket in the path when pathStyle is set', async () => {
      const bucket = await freshBucket();
      const target = open({ bucket });
      const from = s3.requests.length;
      await target.check();
      await target.put('a.backup.json', chunked(Buffer.from('{"a":1}')), 7);
      assert.equal((await readAll(await target.get('a.backup.json'))).toString(), '{"a":1}');
      const seen = s3.requests.slice(from);
      assert.ok(seen.length >= 4);
      for (const request of seen) {
        assert.equal(request.addressing, 'path');
        assert.equal(request.bucket, bucket);
        assert.equal(request.headers.host, new URL(s3.endpoint).host);
      }
    });

    it('addresses the bucket in the host name otherwise (<bucket>.localhost, loopback by RFC 6761)', async () => {
      const bucket = await freshBucket();
      const target = open({ bucket, endpoint: s3.localhostEndpoint, pathStyle: false });
      const from = s3.requests.length;
      await target.check();
      const data = randomBytes(11 * MIB);
      await target.put('v.backup.tar.gz', chunked(data), data.length);
      assert.equal(sha256(await readAll(await target.get('v.backup.tar.gz'))), sha256(data));
      assert.deepEqual((await target.list()).map(({ key }) => key), ['v.backup.tar.gz']);
      assert.equal(await target.clearDebris(new Date()), 0);
      const seen = s3.requests.slice(from);
      assert.ok(seen.some(({ operation }) => operation === 'UploadPart'));
      for (const request of seen) {
        assert.equal(request.addressing, 'virtual-host', `${request.operation} came path-style`);
        assert.equal(request.headers.host, `${bucket}.localhost:${new URL(s3.endpoint).port}`);
        assert.equal(request.status < 300, true, `${request.operation} answered ${request.status}`);
      }
    });

    it('lists only the objects directly under its prefix, keyed relative to it', async () => {
      const bucket = await freshBucket();
      await direct.send(new PutObjectCommand({ Bucket: bucket, Key: `${PREFIX}/nested/x.backup.json`, Body: Buffer.from('{}') }));
      const target = open({ bucket });
      await target.put('20261126T000000000Z-abcdef.backup.json', chunked(Buffer.from('{}')), 2);
      assert.deepEqual((await target.list()).map(({ key }) => key), ['20261126T000000000Z-abcdef.backup.json']);
      const everything = open({ bucket, prefix: '' });
      assert.deepEqual((await everything.list()).map(({ key }) => key).sort(), ['other.backup.json']);
      await assert.rejects(target.put('nested/x.backup.json', chunked(Buffer.from('{}')), 2), TypeError);
    });

    it('sends each part of a body larger than partSize as its own UploadPart, each checked against its SHA-256', async () => {
      const bucket = await freshBucket();
      const target = open({ bucket, partSize: 5 * MIB, queueSize: 2 });
      const data = randomBytes(17 * MIB + 3);
      const from = s3.requests.length;
      await target.put('big.backup.tar.gz.enc', chunked(data), data.length);
      const seen = s3.requests.slice(from);
      const parts = seen.filter(({ operation }) => operation === 'UploadPart');
      assert.deepEqual(seen.map(({ operation }) => operation).filter((op) => op !== 'UploadPart'), ['CreateMultipartUpload', 'CompleteMultipartUpload']);
      assert.deepEqual(parts.map(({ query }) => Number(query.partNumber)).sort((a, b) => a - b), [1, 2, 3, 4]);
      for (const part of parts) {
        assert.match(String(part.headers['x-amz-content-sha256']), /^[0-9a-f]{64}$/);
        assert.equal(part.status, 200);
      }
      assert.deepEqual(parts.map(({ headers }) => Number(headers['content-length'])).sort((a, b) => a - b), [2 * MIB + 3, 5 * MIB, 5 * MIB, 5 * MIB]);
      assert.equal(sha256(await readAll(await target.get('big.backup.tar.gz.enc'))), sha256(data));

      const small = s3.requests.length;
      await target.put('small.backup.json', chunked(Buffer.from('{}')), 2);
      assert.deepEqual(s3.requests.slice(small).map(({ operation }) => operation), ['PutObject']);
    });

    it('refuses a multipart body one byte longer or shorter than its size, and leaves nothing behind', async () => {
      const bucket = await freshBucket();
      const target = open({ bucket });
      const data = randomBytes(12 * MIB + 1);
      // 12 MiB + 1 and 12 MiB - 1 make three 5 MiB parts as 12 MiB does: only counting tells them apart.
      assert.equal(await failure(target.put('long.backup.tar.gz', chunked(data), data.length - 2)), 'protocol');
      assert.equal(await failure(target.put('short.backup.tar.gz', chunked(data.subarray(0, data.length - 2)), data.length)), 'protocol');
      assert.deepEqual(await raw(bucket), []);
    });

    it('asks for server-side encryption on every object it writes, when configured', async () => {
      const bucket = await freshBucket();
      const cases = [
        { sse: { kind: 'AES256' as const }, header: 'AES256', keyId: undefined },
        { sse: { kind: 'aws:kms' as const, keyId: 'arn:aws:kms:us-east-1:111122223333:key/test' }, header: 'aws:kms', keyId: 'arn:aws:kms:us-east-1:111122223333:key/test' },
      ];
      for (const { sse, header, keyId } of cases) {
        const target = open({ bucket, serverSideEncryption: sse });
        const from = s3.requests.length;
        await target.put('small.backup.json', chunked(Buffer.from('{}')), 2);
        const data = randomBytes(6 * MIB);
        await target.put('large.backup.tar.gz', chunked(data), data.length);
        const writes = s3.requests.slice(from).filter(({ operation }) => operation === 'PutObject' || operation === 'CreateMultipartUpload');
        assert.deepEqual(writes.map(({ operation }) => operation), ['PutObject', 'CreateMultipartUpload']);
        for (const write of writes) {
          assert.equal(write.headers['x-amz-server-side-encryption'], header);
          assert.equal(write.headers['x-amz-server-side-encryption-aws-kms-key-id'], keyId);
        }
      }
      const plain = open({ bucket });
      const from = s3.requests.length;
      await plain.put('plain.backup.json', chunked(Buffer.from('{}')), 2);
      assert.equal(s3.requests.slice(from)[0]!.headers['x-amz-server-side-encryption'], undefined);
    });

    it('answers a wrong secret or access key with "auth", and never shows the secret', async () => {
      const bucket = await freshBucket();
      const secret = `wrong-${randomBytes(18).toString('base64')}`;
      const wrongSecret = open({ bucket, credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: secret } });
      const from = s3.requests.length;
      for (const work of [wrongSecret.check(), wrongSecret.list(), wrongSecret.put('x.backup.json', chunked(Buffer.from('{}')), 2), wrongSecret.get('x.backup.json')]) {
        const error = await targetFailure(work);
        assert.equal(error.reason, 'auth', error.message);
        assert.equal(error.code, 'TARGET_AUTH_FAILED');
        assert.ok(!error.message.includes(secret));
        assert.ok(!inspect(error, { depth: 10, showHidden: true }).includes(secret), 'the secret is in the error or its cause');
      }
      assert.ok(s3.requests.slice(from).every(({ refusedWith }) => refusedWith === 'SignatureDoesNotMatch'));

      const wrongKey = open({ bucket, credentials: { accessKeyId: 'AKIANOSUCHKEY0000000', secretAccessKey: s3.credentials.secretAccessKey } });
      const error = await targetFailure(wrongKey.list());
      assert.equal(error.reason, 'auth');
      assert.match(error.message, /InvalidAccessKeyId/);
      assert.ok(!error.message.includes(s3.credentials.secretAccessKey));
    });

    it('answers a missing bucket with "missing", for every operation', async () => {
      const target = open({ bucket: 'no-such-bucket' });
      for (const work of [target.check(), target.list(), target.stat('a.backup.json'), target.get('a.backup.json'), target.put('a.backup.json', chunked(Buffer.from('{}')), 2), target.clearDebris(new Date())]) {
        const error = await targetFailure(work);
        assert.equal(error.reason, 'missing', error.message);
        assert.equal(error.code, 'TARGET_UNAVAILABLE');
      }
    });

    it('answers a server that accepts but never answers with "timeout", within timeoutSeconds x 3 attempts', async () => {
      const silent = await startSilentServer();
      try {
        const target = open({ bucket: 'backups', endpoint: silent.endpoint, timeoutSeconds: 1 });
        for (const work of [() => target.check(), () => target.put('a.backup.json', chunked(Buffer.from('{}')), 2)]) {
          const before = silent.accepted();
          const started = Date.now();
          const error = await targetFailure(work());
          const elapsed = Date.now() - started;
          assert.equal(error.reason, 'timeout', error.message);
          assert.equal(silent.accepted() - before, 3, 'three attempts, each on a connection of its own');
          assert.ok(elapsed >= 2900 && elapsed < 3 * 1000 + 2000, `failed after ${elapsed} ms`);
        }
      } finally {
        await silent.stop();
      }
    });

    it('answers a server that never accepts the connection with "timeout" too (connect timeout)', async () => {
      const hole = await startBlackHole();
      try {
        const target = open({ bucket: 'backups', endpoint: `http://${hole.addr}`, timeoutSeconds: 1 });
        const started = Date.now();
        const error = await targetFailure(target.list());
        const elapsed = Date.now() - started;
        assert.equal(error.reason, 'timeout', error.message);
        assert.ok(elapsed >= 2900 && elapsed < 3 * 1000 + 2000, `failed after ${elapsed} ms`);
      } finally {
        hole.stop();
      }
    });

    it('answers an endpoint where nothing listens with "unreachable", at once', async () => {
      const target = open({ bucket: 'backups', endpoint: await unusedEndpoint() });
      const started = Date.now();
      const error = await targetFailure(target.check());
      assert.equal(error.reason, 'unreachable', error.message);
      assert.match(error.message, /ECONNREFUSED/);
      assert.ok(Date.now() - started < 2000);
    });

    it('answers connections that are reset with "unreachable", not the SDK\'s "TimeoutError": at connect, and in the middle of an upload', async () => {
      const bucket = await freshBucket();
      const proxy = await startTcpProxy(s3.endpoint.slice('http://'.length));
      try {
        const target = open({ bucket, endpoint: `http://${proxy.addr}` });
        proxy.resetting(true);
        for (const work of [() => target.list(), () => target.check(), () => target.put('a.backup.json', chunked(Buffer.from('{}')), 2)]) {
          const error = await targetFailure(work());
          assert.equal(error.reason, 'unreachable', error.message);
          assert.match(error.message, /ECONNRESET|EPIPE/);
          assert.doesNotMatch(error.message, /timeout/i);
        }
        // Reset once its parts are on the way: whatever the SDK retries meets the reset too.
        proxy.resetting(false);
        const data = randomBytes(12 * MIB);
        const seen = s3.requests.length;
        const upload = target.put('reset.backup.tar.gz', chunked(data), data.length);
        while (!s3.requests.slice(seen).some((request) => request.operation === 'UploadPart')) await new Promise((resolve) => setTimeout(resolve, 2));
        proxy.resetting(true);
        const error = await targetFailure(upload);
        assert.equal(error.reason, 'unreachable', error.message);
        assert.doesNotMatch(error.message, /timeout/i);
      } finally {
        await proxy.close();
      }
    });

    // 'protocol', not 'unreachable': the server was reached and answered, but not as S3 does;
    // trying again later will not help, and the operator should look at the endpoint, not the network.
    for (const kind of ['not-http', 'plain-text', 'malformed-xml', 'foreign-xml'] as const) {
      it(`answers garbage (${kind}) with "protocol"`, async () => {
        const garbage = await startGarbageServer(kind);
        try {
          const target = open({ bucket: 'backups', endpoint: garbage.endpoint });
          for (const work of [target.check(), target.list(), target.clearDebris(new Date())]) {
            assert.equal(await failure(work), 'protocol');
          }
        } finally {
          await garbage.stop();
        }
      });
    }

    it('fails a download that breaks after it began with a TargetError from the stream: "timeout" when it stalls, "unreachable" when reset', async () => {
      for (const [mode, reason] of [['stall', 'timeout'], ['reset', 'unreachable']] as const) {
        const broken = await startBrokenBodyServer(mode);
        try {
          const target = open({ bucket: 'backups', endpoint: broken.endpoint, timeoutSeconds: 1 });
          const stream = await target.get('20261126T000000000Z-abcdef.backup.tar.gz.enc');
          const started = Date.now();
          const error = await targetFailure(readAll(stream));
          assert.equal(error.reason, reason, error.message);
          assert.ok(Date.now() - started < 4000);
        } finally {
          await broken.stop();
        }
      }
    });

    it('answers a full store with "full", and leaves no upload behind', async () => {
      const bucket = await freshBucket();
      const target = open({ bucket });
      const data = randomBytes(12 * MIB);
      s3.failNext('UploadPart', { status: 507, code: 'InsufficientStorage', message: 'The store is full' }, 10);
      const error = await targetFailure(target.put('full.backup.tar.gz', chunked(data), data.length));
      assert.equal(error.reason, 'full', error.message);
      assert.deepEqual(await raw(bucket), []);
      s3.failNext('UploadPart', { status: 507, code: 'InsufficientStorage' }, 0);

      s3.failNext('PutObject', { status: 400, code: 'EntityTooLarge', message: 'Your proposed upload exceeds the maximum allowed object size.' });
      assert.equal(await failure(target.put('small.backup.json', chunked(Buffer.from('{}')), 2)), 'full');
    });

    it('aborts its own multipart upload when the put is aborted, without waiting for clearDebris', async () => {
      const bucket = await freshBucket();
      const target = open({ bucket });
      const controller = new AbortController();
      const body = () =>
        Readable.from(
          (async function* () {
            for (let i = 0; i < 30; i += 1) {
              if (i === 12) controller.abort();
              yield randomBytes(MIB);
              await new Promise((resolve) => setTimeout(resolve, 5));
            }
          })(),
        );
      const from = s3.requests.length;
      await assert.rejects(target.put('aborted.backup.tar.gz', body, 30 * MIB, { signal: controller.signal }), (error: Error) => error.name === 'AbortError');
      assert.ok(s3.requests.slice(from).some(({ operation }) => operation === 'AbortMultipartUpload'));
      assert.deepEqual(await raw(bucket), []);
    });

    it('clears only the multipart uploads under its own prefix', async () => {
      const bucket = await freshBucket();
      for (const Key of [`${PREFIX}/old.backup.tar.gz`, `${PREFIX}-archive/old.backup.tar.gz`, 'elsewhere.tar.gz']) {
        await direct.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key }));
      }
      const target = open({ bucket });
      assert.deepEqual(await raw(bucket), ['upload:old.backup.tar.gz']);
      assert.equal(await target.clearDebris(new Date(Date.now() - 60_000)), 0, 'an upload started after the cut-off is left alone');
      assert.deepEqual(await raw(bucket), ['upload:old.backup.tar.gz']);
      assert.equal(await target.clearDebris(new Date(Date.now() + 1000)), 1);
      assert.deepEqual(await raw(bucket), []);
      const everywhere = await direct.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
      assert.deepEqual((everywhere.Uploads ?? []).map(({ Key }) => Key).sort(), ['elsewhere.tar.gz', `${PREFIX}-archive/old.backup.tar.gz`]);
    });
  });

  describe('the test server itself refuses what S3 refuses', () => {
    const signer = (secretAccessKey = s3.credentials.secretAccessKey) =>
      new SignatureV4({ credentials: { ...s3.credentials, secretAccessKey }, region: s3.region, service: 's3', sha256: NodeSha256, uriEscapePath: false });

    it('refuses a body that does not match its signed x-amz-content-sha256', async () => {
      const bucket = await freshBucket();
      const { hostname, port, host } = new URL(s3.endpoint);
      const path = `/${bucket}/${PREFIX}/tampered.backup.json`;
      const signed = await signer().sign({
        method: 'PUT',
        protocol: 'http:',
        hostname,
        port: Number(port),
        path,
        query: {},
        headers: { host, 'x-amz-content-sha256': createHash('sha256').update('{"honest":true}').digest('hex'), 'content-length': '15' },
      });
      const answer = await fetch(`${s3.endpoint}${path}`, { method: 'PUT', headers: signed.headers as Record<string, string>, body: '{"forged":1234}' });
      assert.equal(answer.status, 400);
      assert.match(await answer.text(), /<Code>XAmzContentSHA256Mismatch<\/Code>/);
      assert.deepEqual(await raw(bucket), []);
    });

    it('takes a presigned URL signed with its secret, and refuses one signed with another', async () => {
      const bucket = await freshBucket();
      await direct.send(new PutObjectCommand({ Bucket: bucket, Key: `${PREFIX}/p.backup.json`, Body: Buffer.from('{"p":1}') }));
      const { hostname, port, host } = new URL(s3.endpoint);
      const request = { method: 'GET', protocol: 'http:', hostname, port: Number(port), path: `/${bucket}/${PREFIX}/p.backup.json`, query: {}, headers: { host }, body: {} };
      const url = (query: Record<string, unknown>) => `${s3.endpoint}${request.path}?${new URLSearchParams(query as Record<string, string>).toString()}`;
      const good = await signer().presign(request, { expiresIn: 60 });
      const ok = await fetch(url(good.query ?? {}));
      assert.equal(ok.status, 200);
      assert.equal(await ok.text(), '{"p":1}');

      const bad = await signer('not-the-secret').presign(request, { expiresIn: 60 });
      const refused = await fetch(url(bad.query ?? {}));
      assert.equal(refused.status, 403);
      assert.match(await refused.text(), /<Code>SignatureDoesNotMatch<\/Code>/);
    });

    it("refuses the SDK's default checksum headers, as Backblaze B2 does", async () => {
      const bucket = await freshBucket();
      const defaults = new S3Client({ endpoint: s3.endpoint, region: s3.region, credentials: s3.credentials, forcePathStyle: true });
      try {
        await assert.rejects(defaults.send(new PutObjectCommand({ Bucket: bucket, Key: `${PREFIX}/d.backup.json`, Body: Buffer.from('{}') })), (error: Error) => {
          assert.equal(error.name, 'InvalidArgument');
          assert.match(error.message, /Unsupported header 'x-amz-(sdk-)?checksum-/);
          return true;
        });
      } finally {
        defaults.destroy();
      }
    });
  });
});
