import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { createServer, request as forward, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SignatureV4 } from '@smithy/signature-v4';

/**
 * A real S3-compatible server on loopback ports for the tests, that refuses what a real
 * one refuses: s3rver (npm) keeps the buckets in a temporary directory, and a front on
 * another port checks every request's SigV4 signature before passing it on.
 *
 *   const s3 = await startS3Server();                 // or startS3ServerOrSkip(this) in before()
 *   await s3.createBucket('backups');
 *   new S3Client({ endpoint: s3.endpoint, region: s3.region, credentials: s3.credentials, forcePathStyle: true });
 *   s3.requests.filter((seen) => seen.operation === 'UploadPart');   // what arrived, as S3 names it
 *   s3.failNext('UploadPart', { status: 507, code: 'InsufficientStorage' });
 *   await s3.stop();
 *
 * Why a front: s3rver 3.7.1 does not verify SigV4 (its authentication middleware says
 * "Signature version 4 calculation is unimplemented" and accepts any secret, which we
 * checked), and a target whose wrong secret passes its tests is untested. The front
 * recomputes each signature with @smithy/signature-v4 (the AWS SDK's own signer, rather
 * than signing code of our own) from the configured key and secret, for the Authorization
 * header and for presigned query strings; checks x-amz-content-sha256 against the body
 * when it is a hex digest; and answers a mismatch as S3 does, with its XML error
 * (SignatureDoesNotMatch, InvalidAccessKeyId, XAmzContentSHA256Mismatch, ...). Like
 * Backblaze B2 (whose S3 API documents them as unsupported), it refuses the SDK's flexible
 * checksums: x-amz-checksum-* and x-amz-sdk-checksum-algorithm headers with 400
 * InvalidArgument "Unsupported header '...' received for this API call.", and aws-chunked
 * bodies (STREAMING-*, the checksum trailers), so that a client sending them fails here too.
 *
 * s3rver 3.7.1 also lacks ListMultipartUploads (NotImplemented) and AbortMultipartUpload
 * (MethodNotAllowed), which a target needs to find and clear the debris of interrupted
 * uploads. The front answers those two from s3rver's own store directory
 * (<bucket>/._S3rver_uploads/<upload id>/key), and refuses parts for an upload it aborted
 * (NoSuchUpload) as S3 does. Virtual-host requests (Host: <bucket>.localhost:<port>) are
 * passed on in path style, the only one s3rver takes from 127.0.0.1. Its listing with a
 * delimiter misses common prefixes that hold only deeper ones (listCommonPrefixesAtAnyDepth,
 * below, mends it), which left a Litestream replica on it unreadable.
 *
 * Candidates tried before this one, so that the next person need not:
 * - s3rver alone: no SigV4 check (above).
 * - Debian 12 has no MinIO, moto, garage or seaweedfs package; its radosgw (16.2.15) needs a
 *   whole Ceph cluster (monitors, OSDs) to run.
 * - npm: @20minutes/s3rver 5.0.0 (a fork that computes V4 signatures with its own
 *   canonicalisation and does not check the payload hash) lacks ListMultipartUploads and
 *   AbortMultipartUpload like s3rver; fauxqs 2.4.1 checks no signature and has no
 *   ListMultipartUploads; @push.rocks/smarts3 wraps s3rver. Their sources were read, not
 *   installed. MinIO's and moto's npm packages are clients or container wrappers.
 * - PyPI (moto's server) cannot be reached from this workplace.
 */
export interface S3ServerOptions {
  readonly accessKeyId?: string;
  readonly secretAccessKey?: string;
  readonly sessionToken?: string;
  /** The region signatures must be scoped to; 'us-east-1' by default. */
  readonly region?: string;
}

/** One request as the front received it. */
export interface SeenRequest {
  /** The S3 operation, e.g. PutObject, UploadPart, ListObjectsV2, HeadBucket. */
  readonly operation: string;
  readonly method: string;
  readonly bucket: string | undefined;
  readonly key: string | undefined;
  /** 'virtual-host' when the bucket came in the Host header (<bucket>.localhost). */
  readonly addressing: 'path' | 'virtual-host';
  readonly headers: IncomingHttpHeaders;
  readonly query: Readonly<Record<string, string>>;
  /** The status answered: the front's refusal, or s3rver's answer. 0 while pending. */
  status: number;
  /** The S3 error code the front refused the request with, if it did. */
  refusedWith?: string;
}

export interface S3TestServer {
  /** http://127.0.0.1:<port>: path-style addressing. */
  readonly endpoint: string;
  /** http://localhost:<port>: the SDK addresses buckets as <bucket>.localhost under it. */
  readonly localhostEndpoint: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string };
  /** Every request the front received, in order. */
  readonly requests: SeenRequest[];
  createBucket(name: string): Promise<void>;
  /** The next `count` requests for `operation` are refused with this S3 error. */
  failNext(operation: string, error: { readonly status: number; readonly code: string; readonly message?: string }, count?: number): void;
  /** Down: every connection dropped as it arrives (keep-alive ones too), until set up again. */
  setDown(down: boolean): void;
  stop(): Promise<void>;
}

interface S3rverInstance {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
  readonly store: { putBucket(name: string): Promise<unknown> };
}

const UPLOADS_DIR = '._S3rver_uploads';
const SKEW_MS = 15 * 60 * 1000;
const PRESIGN_PARAMS = ['X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-SignedHeaders', 'X-Amz-Signature', 'X-Amz-Security-Token'];

/** SHA-256 and HMAC-SHA-256 from node:crypto, in the shape the SDK's signer takes. */
export class NodeSha256 {
  private readonly hash;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView, encoding?: 'utf8' | 'ascii' | 'latin1'): void {
    this.hash.update(typeof data === 'string' ? Buffer.from(data, encoding ?? 'utf8') : bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}

function bytes(data: string | ArrayBuffer | ArrayBufferView): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

class Refusal {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly message: string,
  ) {}
}

function xmlEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function answer(res: ServerResponse, method: string, refusal: Refusal): void {
  const body =
    method === 'HEAD'
      ? ''
      : `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${refusal.code}</Code><Message>${xmlEscape(refusal.message)}</Message>` +
        `<RequestId>${randomBytes(8).toString('hex').toUpperCase()}</RequestId></Error>`;
  res.writeHead(refusal.status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Query parameters, decoded; a name without '=' (`?uploads`) has the value ''. */
function parseQuery(raw: string): Record<string, string> {
  const query: Record<string, string> = {};
  for (const part of raw.split('&')) {
    if (!part) continue;
    const equals = part.indexOf('=');
    const name = decodeURIComponent(equals < 0 ? part : part.slice(0, equals));
    query[name] = equals < 0 ? '' : decodeURIComponent(part.slice(equals + 1));
  }
  return query;
}

function operationOf(method: string, bucket: string | undefined, key: string | undefined, query: Record<string, string>): string {
  const has = (name: string) => name in query;
  if (!bucket) return method === 'GET' ? 'ListBuckets' : `${method} /`;
  if (!key) {
    if (method === 'HEAD') return 'HeadBucket';
    if (method === 'PUT') return 'CreateBucket';
    if (method === 'DELETE') return 'DeleteBucket';
    if (method === 'POST') return has('delete') ? 'DeleteObjects' : 'PostObject';
    return has('uploads') ? 'ListMultipartUploads' : query['list-type'] === '2' ? 'ListObjectsV2' : 'ListObjects';
  }
  if (method === 'HEAD') return 'HeadObject';
  if (method === 'GET') return 'GetObject';
  if (method === 'DELETE') return has('uploadId') ? 'AbortMultipartUpload' : 'DeleteObject';
  if (method === 'PUT') return has('uploadId') ? 'UploadPart' : has('x-amz-copy-source') ? 'CopyObject' : 'PutObject';
  return has('uploads') ? 'CreateMultipartUpload' : has('uploadId') ? 'CompleteMultipartUpload' : 'PostObject';
}

/** 20261126T101500Z -> the Date, or undefined. */
function parseAmzDate(text: string | undefined): Date | undefined {
  const match = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text ?? '');
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s] = match.map(Number) as [number, number, number, number, number, number, number];
  return new Date(Date.UTC(y, mo - 1, d, h, mi, s));
}

function sameHex(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startS3Server(options: S3ServerOptions = {}): Promise<S3TestServer> {
  const accessKeyId = options.accessKeyId ?? `AKIATEST${randomBytes(6).toString('hex').toUpperCase()}`;
  const secretAccessKey = options.secretAccessKey ?? randomBytes(30).toString('base64');
  const sessionToken = options.sessionToken;
  const region = options.region ?? 'us-east-1';
  const signer = new SignatureV4({
    credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) },
    region,
    service: 's3',
    sha256: NodeSha256,
    // S3 signs the path as sent, without the second encoding other services use.
    uriEscapePath: false,
  });

  const dir = mkdtempSync(path.join(tmpdir(), 'license-server-s3-'));
  let s3rver: S3rverInstance | undefined;
  let front: Server | undefined;
  try {
    // s3rver is CommonJS without types of its own; only what is used here is declared.
    const S3rver = ((await import('s3rver' as string)) as { default: new (options: object) => S3rverInstance }).default;
    await listCommonPrefixesAtAnyDepth();
    s3rver = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, vhostBuckets: false, configureBuckets: [] });
    const upstreamPort = (await s3rver.run()).port;

    const requests: SeenRequest[] = [];
    const injected = new Map<string, { status: number; code: string; message: string; left: number }>();
    // Part uploads in flight per upload id, so that an abort waits for them (S3: "parts being
    // uploaded while the upload is aborted may or may not succeed"; here they finish first).
    const inFlight = new Map<string, Set<Promise<void>>>();
    const aborted = new Set<string>();

    const uploadDir = (bucket: string, uploadId: string) => path.join(dir, bucket, UPLOADS_DIR, path.basename(uploadId));
    const bucketExists = (bucket: string) => existsSync(path.join(dir, path.basename(bucket)));

    const verify = async (req: IncomingMessage, query: Record<string, string>, rawPath: string, hostname: string, port: number): Promise<'unsigned' | Buffer | undefined> => {
      const authorization = req.headers.authorization;
      const presigned = 'X-Amz-Algorithm' in query;
      if (authorization && presigned) throw new Refusal(400, 'InvalidArgument', 'Only one auth mechanism allowed');
      if (!authorization && !presigned) throw new Refusal(403, 'AccessDenied', 'Anonymous access is not allowed on this server');

      let credential: string;
      let signedHeaders: string[];
      let provided: string;
      let signingDate: Date | undefined;
      if (authorization) {
        const match = /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/.exec(authorization);
        if (!match) throw new Refusal(400, 'AuthorizationHeaderMalformed', 'The authorization header is malformed');
        [, credential, , provided] = match as unknown as [string, string, string, string];
        signedHeaders = match[2]!.split(';');
        signingDate = parseAmzDate(req.headers['x-amz-date'] as string | undefined);
        if (!signingDate) throw new Refusal(403, 'AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
        if (Math.abs(Date.now() - signingDate.getTime()) > SKEW_MS) {
          throw new Refusal(403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.');
        }
      } else {
        if (query['X-Amz-Algorithm'] !== 'AWS4-HMAC-SHA256') throw new Refusal(400, 'AuthorizationQueryParametersError', 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"');
        credential = query['X-Amz-Credential'] ?? '';
        signedHeaders = (query['X-Amz-SignedHeaders'] ?? '').split(';');
        provided = query['X-Amz-Signature'] ?? '';
        signingDate = parseAmzDate(query['X-Amz-Date']);
        const expires = Number(query['X-Amz-Expires']);
        if (!signingDate || !Number.isInteger(expires) || expires < 0 || expires > 604_800) {
          throw new Refusal(400, 'AuthorizationQueryParametersError', 'X-Amz-Date and X-Amz-Expires must be given and valid');
        }
        if (Date.now() > signingDate.getTime() + expires * 1000) throw new Refusal(403, 'AccessDenied', 'Request has expired');
      }

      const [keyId, day, scopeRegion, service, terminator] = credential.split('/');
      if (keyId !== accessKeyId) throw new Refusal(403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
      if (scopeRegion !== region || service !== 's3' || terminator !== 'aws4_request' || day !== signingDate.toISOString().slice(0, 10).replace(/-/g, '')) {
        throw new Refusal(400, 'AuthorizationHeaderMalformed', `The authorization header is malformed; the credential scope is wrong; expecting '${region}'`);
      }
      const token = authorization ? req.headers['x-amz-security-token'] : query['X-Amz-Security-Token'];
      if ((token ?? undefined) !== sessionToken) throw new Refusal(403, 'InvalidToken', 'The provided token is malformed or otherwise invalid.');
      if (!signedHeaders.includes('host')) throw new Refusal(400, 'AuthorizationHeaderMalformed', 'The host header must be signed');

      const contentSha = req.headers['x-amz-content-sha256'] as string | undefined;
      if (authorization) {
        if (!contentSha) throw new Refusal(400, 'InvalidRequest', 'Missing required header for this request: x-amz-content-sha256');
        if (contentSha.startsWith('STREAMING-')) {
          throw new Refusal(501, 'NotImplemented', `aws-chunked bodies (${contentSha}) are not accepted here, as by several S3-compatible providers`);
        }
        if (contentSha !== 'UNSIGNED-PAYLOAD' && !/^[0-9a-f]{64}$/.test(contentSha)) {
          throw new Refusal(400, 'InvalidArgument', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD or a SHA-256 hex digest');
        }
      }

      const headers: Record<string, string> = {};
      for (const name of signedHeaders) {
        const value = req.headers[name];
        if (value === undefined) throw new Refusal(403, 'SignatureDoesNotMatch', `The signed header ${name} is missing`);
        headers[name] = Array.isArray(value) ? value.join(',') : value;
      }
      const toSign = { method: req.method ?? 'GET', protocol: 'http:', hostname, port, path: rawPath, headers, query: { ...query } };
      let expected: string;
      if (authorization) {
        const signed = await signer.sign(toSign, { signingDate, signableHeaders: new Set(signedHeaders), signingRegion: region, signingService: 's3' });
        expected = /Signature=([0-9a-f]{64})/.exec(String(signed.headers.authorization))?.[1] ?? '';
      } else {
        delete toSign.query['X-Amz-Signature'];
        const expiresIn = Number(query['X-Amz-Expires']);
        // A presigned request's payload is UNSIGNED-PAYLOAD; a body that is not bytes gets the signer to say so.
        const signed = await signer.presign(
          { ...toSign, body: {} },
          { signingDate, expiresIn, signableHeaders: new Set(signedHeaders), unhoistableHeaders: new Set(signedHeaders), signingRegion: region, signingService: 's3' },
        );
        expected = String(signed.query?.['X-Amz-Signature'] ?? '');
      }
      if (!sameHex(expected, provided)) {
        throw new Refusal(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.');
      }

      const unsupported = Object.keys(req.headers).find((name) => name.startsWith('x-amz-checksum-') || name === 'x-amz-sdk-checksum-algorithm');
      if (unsupported) throw new Refusal(400, 'InvalidArgument', `Unsupported header '${unsupported}' received for this API call.`);

      if (authorization && contentSha && contentSha !== 'UNSIGNED-PAYLOAD') {
        const body = await readBody(req);
        if (createHash('sha256').update(body).digest('hex') !== contentSha) {
          throw new Refusal(400, 'XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed.");
        }
        return body;
      }
      return 'unsigned';
    };

    const listUploads = async (res: ServerResponse, bucket: string, query: Record<string, string>) => {
      const prefix = query.prefix ?? '';
      const delimiter = query.delimiter ?? '';
      const uploads: Array<{ key: string; id: string; initiated: Date }> = [];
      const prefixes = new Set<string>();
      const root = path.join(dir, bucket, UPLOADS_DIR);
      for (const id of existsSync(root) ? await readdir(root) : []) {
        if (aborted.has(id)) continue;
        const keyFile = path.join(root, id, 'key');
        const key = await readFile(keyFile, 'utf8').catch(() => undefined);
        if (key === undefined || !key.startsWith(prefix)) continue;
        const cut = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
        if (cut >= 0) prefixes.add(key.slice(0, cut + delimiter.length));
        else uploads.push({ key, id, initiated: (await stat(keyFile)).mtime });
      }
      uploads.sort((a, b) => a.key.localeCompare(b.key) || a.initiated.getTime() - b.initiated.getTime());
      const owner = '<Owner><ID>s3-test</ID><DisplayName>s3-test</DisplayName></Owner>';
      const body =
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
        `<Bucket>${xmlEscape(bucket)}</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>` +
        `<Prefix>${xmlEscape(prefix)}</Prefix>${delimiter ? `<Delimiter>${xmlEscape(delimiter)}</Delimiter>` : ''}<MaxUploads>10000</MaxUploads><IsTruncated>false</IsTruncated>` +
        uploads
          .map(
            ({ key, id, initiated }) =>
              `<Upload><Key>${xmlEscape(key)}</Key><UploadId>${id}</UploadId><Initiator><ID>s3-test</ID><DisplayName>s3-test</DisplayName></Initiator>${owner}` +
              `<StorageClass>STANDARD</StorageClass><Initiated>${initiated.toISOString()}</Initiated></Upload>`,
          )
          .join('') +
        [...prefixes].sort().map((p) => `<CommonPrefixes><Prefix>${xmlEscape(p)}</Prefix></CommonPrefixes>`).join('') +
        '</ListMultipartUploadsResult>';
      res.writeHead(200, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };

    const uploadOf = async (bucket: string, key: string, uploadId: string): Promise<void> => {
      const stored = aborted.has(uploadId) ? undefined : await readFile(path.join(uploadDir(bucket, uploadId), 'key'), 'utf8').catch(() => undefined);
      if (stored !== key) {
        throw new Refusal(404, 'NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.');
      }
    };

    const abortUpload = async (res: ServerResponse, bucket: string, key: string, uploadId: string) => {
      await uploadOf(bucket, key, uploadId);
      aborted.add(uploadId);
      const pending = [...(inFlight.get(uploadId) ?? [])];
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled(pending), new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]);
      clearTimeout(timer);
      await rm(uploadDir(bucket, uploadId), { recursive: true, force: true });
      res.writeHead(204);
      res.end();
    };

    const pass = (req: IncomingMessage, res: ServerResponse, seen: SeenRequest, forwardPath: string, body: Buffer | 'unsigned') =>
      new Promise<void>((resolve) => {
        const headers: IncomingHttpHeaders = { ...req.headers, host: `127.0.0.1:${upstreamPort}` };
        // s3rver knows only its own S3RVER key; the signature was checked here.
        delete headers.authorization;
        delete headers.expect;
        const upstream = forward({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: forwardPath, headers }, (answerStream) => {
          seen.status = answerStream.statusCode ?? 0;
          res.writeHead(seen.status, answerStream.headers);
          answerStream.pipe(res);
          answerStream.on('end', resolve);
          answerStream.on('error', () => resolve());
        });
        upstream.on('error', () => {
          if (!res.headersSent) answer(res, req.method ?? 'GET', new Refusal(502, 'InternalError', 's3rver did not answer'));
          else res.destroy();
          resolve();
        });
        // A client that goes away mid-request takes the forwarded request with it.
        res.on('close', () => {
          if (!res.writableFinished) upstream.destroy();
          resolve();
        });
        if (body === 'unsigned') req.pipe(upstream);
        else upstream.end(body);
      });

    const handle = async (req: IncomingMessage, res: ServerResponse) => {
      const method = req.method ?? 'GET';
      const url = req.url ?? '/';
      const mark = url.indexOf('?');
      const rawPath = mark < 0 ? url : url.slice(0, mark);
      const rawQuery = mark < 0 ? '' : url.slice(mark + 1);
      const host = req.headers.host ?? '';
      const [hostname = '', portText] = host.split(':');
      const virtualBucket = hostname.endsWith('.localhost') ? hostname.slice(0, -'.localhost'.length) : undefined;
      const pathStyle = virtualBucket === undefined ? rawPath : `/${virtualBucket}${rawPath}`;
      const slash = pathStyle.indexOf('/', 1);
      const bucket = decodeURIComponent(slash < 0 ? pathStyle.slice(1) : pathStyle.slice(1, slash)) || undefined;
      const key = slash < 0 ? undefined : decodeURIComponent(pathStyle.slice(slash + 1)) || undefined;
      let query: Record<string, string>;
      try {
        query = parseQuery(rawQuery);
      } catch {
        return answer(res, method, new Refusal(400, 'InvalidArgument', 'The query string is not well formed'));
      }
      const seen: SeenRequest = {
        operation: operationOf(method, bucket, key, query),
        method,
        bucket,
        key,
        addressing: virtualBucket === undefined ? 'path' : 'virtual-host',
        headers: req.headers,
        query,
        status: 0,
      };
      requests.push(seen);
      const uploadId = query.uploadId;
      let finishPart: (() => void) | undefined;
      if (seen.operation === 'UploadPart' && uploadId) {
        const parts = inFlight.get(uploadId) ?? new Set();
        inFlight.set(uploadId, parts);
        const done = new Promise<void>((resolve) => (finishPart = resolve));
        parts.add(done);
        res.on('close', () => {
          parts.delete(done);
          finishPart?.();
        });
      }
      try {
        const body = await verify(req, query, rawPath, hostname, Number(portText) || 80);
        const injection = injected.get(seen.operation);
        if (injection && injection.left > 0) {
          injection.left -= 1;
          throw new Refusal(injection.status, injection.code, injection.message);
        }
        if (bucket && !bucketExists(bucket) && seen.operation !== 'CreateBucket') {
          throw new Refusal(404, 'NoSuchBucket', 'The specified bucket does not exist');
        }
        if (bucket && seen.operation === 'ListMultipartUploads') {
          seen.status = 200;
          return await listUploads(res, bucket, query);
        }
        if (bucket && key && uploadId && seen.operation === 'AbortMultipartUpload') {
          seen.status = 204;
          return await abortUpload(res, bucket, key, uploadId);
        }
        if (bucket && key && uploadId) await uploadOf(bucket, key, uploadId);
        const forwardQuery = rawQuery
          .split('&')
          .filter((part) => part && !PRESIGN_PARAMS.includes(decodeURIComponent(part.split('=')[0]!)))
          .join('&');
        await pass(req, res, seen, forwardQuery ? `${pathStyle}?${forwardQuery}` : pathStyle, body ?? 'unsigned');
      } catch (error) {
        const refusal = error instanceof Refusal ? error : new Refusal(500, 'InternalError', (error as Error).message);
        seen.status = refusal.status;
        seen.refusedWith = refusal.code;
        // Read what the client is still sending, so that it gets the answer rather than a reset.
        if (!req.readableEnded) req.resume();
        if (!res.headersSent) answer(res, method, refusal);
      }
    };

    // An outage (setDown): every connection is dropped as it arrives, as a server that went away would.
    let down = false;
    const frontServer = createServer((req, res) => {
      if (down) {
        req.socket.destroy();
        return;
      }
      void handle(req, res);
    });
    front = frontServer;
    await new Promise<void>((resolve, reject) => {
      frontServer.once('error', reject);
      frontServer.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (frontServer.address() as AddressInfo).port;
    const running = s3rver;

    return {
      endpoint: `http://127.0.0.1:${port}`,
      localhostEndpoint: `http://localhost:${port}`,
      region,
      credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) },
      requests,
      async createBucket(name) {
        await running.store.putBucket(name);
      },
      failNext(operation, error, count = 1) {
        injected.set(operation, { status: error.status, code: error.code, message: error.message ?? `${error.code} (injected by the test)`, left: count });
      },
      setDown(value) {
        down = value;
        if (value) frontServer.closeAllConnections();
      },
      async stop() {
        frontServer.closeAllConnections();
        await new Promise<void>((resolve) => frontServer.close(() => resolve()));
        await running.close().catch(() => undefined);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    front?.close();
    await s3rver?.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * For a suite's before(): the server, or under CI=true a failure when it cannot start
 * (never a skip); elsewhere the suite is skipped, loudly.
 */
interface ListedObjects {
  objects: Array<{ key: string }>;
  commonPrefixes: string[];
  isTruncated: boolean;
}

/**
 * s3rver 3.7.1 lists with a delimiter by walking its store's directories and skipping those
 * below a common prefix, so a prefix that holds only deeper "directories" is never found:
 * `generations/<id>/` of a Litestream replica (whose objects are under `snapshots/` and `wal/`)
 * lists as nothing, and Litestream restores nothing. S3 groups every key below the prefix.
 * Patched once, in this process's s3rver: the objects are listed without the delimiter and
 * grouped here, at any depth, as S3 does.
 */
let listingPatched = false;
async function listCommonPrefixesAtAnyDepth(): Promise<void> {
  if (listingPatched) return;
  const { default: FilesystemStore } = (await import('s3rver/lib/stores/filesystem.js' as string)) as {
    default: { prototype: { listObjects(bucket: string, options: { delimiter?: string; prefix?: string; maxKeys?: number; startAfter?: string }): Promise<ListedObjects> } };
  };
  const original = FilesystemStore.prototype.listObjects;
  FilesystemStore.prototype.listObjects = async function (bucket, options) {
    if (!options.delimiter) return original.call(this, bucket, options);
    const all = await original.call(this, bucket, { ...options, delimiter: '', maxKeys: Infinity });
    const prefix = options.prefix ?? '';
    const prefixes = new Set<string>();
    const objects: Array<{ key: string }> = [];
    for (const object of all.objects) {
      const at = object.key.slice(prefix.length).indexOf(options.delimiter);
      if (at === -1) objects.push(object);
      else prefixes.add(object.key.slice(0, prefix.length + at + options.delimiter.length));
    }
    // As s3rver pages (by the last object's key), max-keys counts objects only.
    const maxKeys = options.maxKeys ?? Infinity;
    return { objects: objects.slice(0, maxKeys), commonPrefixes: [...prefixes].sort(), isTruncated: objects.length > maxKeys };
  };
  listingPatched = true;
}

export async function startS3ServerOrSkip(context: Mocha.Context, options?: S3ServerOptions): Promise<S3TestServer> {
  try {
    return await startS3Server(options);
  } catch (error) {
    const problem = (error as Error).message || String(error);
    if (process.env.CI === 'true') throw new Error(`the S3 test server is required under CI=true but did not start: ${problem}`);
    console.warn(`    (skipping: the S3 test server did not start: ${problem})`);
    context.skip();
  }
}

/** What a fault server gives a test: where it is, and how to end it. */
export interface FaultServer {
  readonly endpoint: string;
  /** Connections it accepted so far. */
  accepted(): number;
  stop(): Promise<void>;
}

async function listenTcp(onConnection: (socket: Socket) => void): Promise<FaultServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createTcpServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    onConnection(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    accepted: () => accepted,
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Accepts every connection and reads what it is sent, but never answers: a hung server. */
export function startSilentServer(): Promise<FaultServer> {
  return listenTcp((socket) => socket.resume());
}

/**
 * Answers every request with what no S3 server sends:
 * - 'not-http': a line that is not HTTP at all (an SSH banner), then closes;
 * - 'plain-text': HTTP 200 with a text/plain page, as a captive portal or a web server would;
 * - 'malformed-xml': HTTP 200 with XML cut off in the middle;
 * - 'foreign-xml': HTTP 200 with well-formed XML that is no S3 answer (a proxy's login page).
 */
export type Garbage = 'not-http' | 'plain-text' | 'malformed-xml' | 'foreign-xml';

const GARBAGE: Record<Exclude<Garbage, 'not-http'>, { type: string; body: string }> = {
  'plain-text': { type: 'text/plain', body: 'It works! This is a web server, not S3.\n' },
  'malformed-xml': { type: 'application/xml', body: '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Name>backups</Na' },
  'foreign-xml': { type: 'application/xml', body: '<?xml version="1.0" encoding="UTF-8"?>\n<html><body><p>Sign in to continue</p></body></html>' },
};

export function startGarbageServer(kind: Garbage): Promise<FaultServer> {
  return listenTcp((socket) => {
    let seen = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => {
      seen += chunk;
      // Answer once the request head has arrived; a body, if any, is read and ignored.
      if (!seen.includes('\r\n\r\n')) return;
      seen = '';
      if (kind === 'not-http') {
        socket.end('SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n');
        return;
      }
      const { type, body } = GARBAGE[kind];
      socket.write(`HTTP/1.1 200 OK\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
  });
}

/** An endpoint where nothing listens, so that connecting is refused at once. */
export async function unusedEndpoint(): Promise<string> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/**
 * Answers every request with 200 and a 1 MiB Content-Length, sends the first 64 KiB of it,
 * then 'stall's (keeps the connection open and silent) or 'reset's it: a download that
 * breaks after it began.
 */
export function startBrokenBodyServer(mode: 'stall' | 'reset'): Promise<FaultServer> {
  return listenTcp((socket) => {
    let seen = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => {
      seen += chunk;
      if (!seen.includes('\r\n\r\n')) return;
      seen = '';
      socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: ${1024 * 1024}\r\n\r\n`);
      socket.write(randomBytes(64 * 1024), () => {
        if (mode === 'reset') socket.resetAndDestroy();
      });
    });
  });
}
