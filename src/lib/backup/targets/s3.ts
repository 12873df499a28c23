import { lookup } from 'node:dns';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { LookupFunction } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
  type ListObjectsV2CommandOutput,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { ExactSize } from './exact-size.js';
import { isTargetError, TargetError, type BackupTarget, type StoredObject, type TargetFailure } from './target.js';

/**
 * The `s3` target kind: any S3-compatible store (AWS S3, MinIO, Backblaze B2, Cloudflare R2,
 * Wasabi) through the AWS SDK v3, the client each of them documents.
 *
 * Objects live under `<prefix>/` in the bucket. An upload goes through lib-storage's Upload:
 * one PUT for a body smaller than a part, a multipart upload otherwise, which S3 shows under
 * its key only once completed; what an interrupted multipart upload leaves is the debris
 * clearDebris aborts. Memory stays near partSize x (queueSize + 1) whatever the size.
 */
export interface S3TargetOptions {
  readonly name: string;
  /** e.g. http://127.0.0.1:9000 or https://<account>.r2.cloudflarestorage.com; AWS when absent. */
  readonly endpoint?: string;
  /** 'us-east-1'; 'auto' for R2. */
  readonly region: string;
  readonly bucket: string;
  /** '' or 'license-server/prod': no leading or trailing slash. */
  readonly prefix: string;
  /** Path-style addressing (endpoint/bucket/key) rather than virtual-host (bucket.endpoint/key). */
  readonly pathStyle: boolean;
  readonly serverSideEncryption?: { readonly kind: 'AES256' } | { readonly kind: 'aws:kms'; readonly keyId?: string };
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string };
  /** Connect timeout, and how long a request's socket may stay idle. */
  readonly timeoutSeconds: number;
  /** Multipart part size; 16 MiB by default, at least 5 MiB (S3's minimum). */
  readonly partSize?: number;
  /** Parts in flight at once; 2 by default. */
  readonly queueSize?: number;
}

const MIB = 1024 * 1024;
const MIN_PART_SIZE = 5 * MIB;
const MAX_PARTS = 10_000;
const ATTEMPTS = 3;

const AUTH_CODES = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'AccessDenied',
  'Forbidden',
  'InvalidToken',
  'ExpiredToken',
  'TokenRefreshRequired',
  'AuthorizationHeaderMalformed',
  'RequestTimeTooSkewed',
  'AccountProblem',
  'AllAccessDisabled',
]);
const MISSING_CODES = new Set(['NoSuchBucket', 'NoSuchKey', 'NotFound', 'NoSuchUpload']);
const FULL_CODES = new Set(['EntityTooLarge', 'QuotaExceeded', 'InsufficientStorage', 'XMinioStorageFull', 'StorageFull']);
const TIMEOUT_CODES = new Set(['TimeoutError', 'ETIMEDOUT', 'RequestTimeout', 'ESOCKETTIMEDOUT']);
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'EPIPE',
  'ServiceUnavailable',
  'SlowDown',
  'InternalError',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
]);

/**
 * RFC 6761 6.3: names under `.localhost` are the loopback address. glibc resolves only
 * `localhost` itself, so an endpoint of http://localhost:9000 with virtual-host addressing
 * (`<bucket>.localhost`) would not resolve without this; every other name goes to the system.
 */
const lookupLocalhostNames = ((hostname: string, options: object, callback: (...args: unknown[]) => void) =>
  lookup(hostname.toLowerCase().endsWith('.localhost') ? 'localhost' : hostname, options, callback)) as unknown as LookupFunction;

interface SdkErrorShape {
  readonly name?: string;
  readonly code?: string;
  readonly Code?: string;
  readonly message?: string;
  readonly $metadata?: { readonly httpStatusCode?: number };
}

function classify(code: string, status: number | undefined): TargetFailure {
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if (AUTH_CODES.has(code)) return 'auth';
  if (MISSING_CODES.has(code)) return 'missing';
  if (FULL_CODES.has(code)) return 'full';
  if (UNREACHABLE_CODES.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_')) return 'unreachable';
  if (status === 507) return 'full';
  if (status === 403 || status === 401) return 'auth';
  if (status === 404) return 'missing';
  // A bucket in another region or behind another endpoint answers with a redirect.
  if (status === 301 || status === 307) return 'missing';
  if (status !== undefined && status >= 500) return 'unreachable';
  // HTTP that does not parse (HPE_*), XML that does not parse, and every other answer that makes no sense.
  return 'protocol';
}

function checkOptions(options: S3TargetOptions): void {
  const name = `s3 target ${options.name}`;
  if (!options.bucket) throw new TypeError(`${name}: bucket is required`);
  if (options.prefix.startsWith('/') || options.prefix.endsWith('/')) throw new TypeError(`${name}: prefix has no leading or trailing slash, not "${options.prefix}"`);
  if (!(options.timeoutSeconds > 0)) throw new TypeError(`${name}: timeoutSeconds must be positive`);
  if (options.partSize !== undefined && !(Number.isInteger(options.partSize) && options.partSize >= MIN_PART_SIZE)) {
    throw new TypeError(`${name}: partSize must be a whole number of bytes, at least 5 MiB`);
  }
  if (options.queueSize !== undefined && !(Number.isInteger(options.queueSize) && options.queueSize >= 1)) throw new TypeError(`${name}: queueSize must be at least 1`);
}

/** `s3://bucket/prefix at <endpoint>`, with any user:password in the endpoint left out. */
function describeLocation(options: S3TargetOptions): string {
  const where = `s3://${options.bucket}${options.prefix ? `/${options.prefix}` : ''}`;
  if (!options.endpoint) return where;
  try {
    const url = new URL(options.endpoint);
    url.username = '';
    url.password = '';
    return `${where} at ${url.toString().replace(/\/$/, '')}`;
  } catch {
    return `${where} at an endpoint that is not a URL`;
  }
}

export function openS3Target(options: S3TargetOptions): BackupTarget {
  checkOptions(options);
  const { name, bucket } = options;
  const root = options.prefix ? `${options.prefix}/` : '';
  const partSizeOption = options.partSize ?? 16 * MIB;
  const queueSize = options.queueSize ?? 2;
  const timeoutMs = Math.round(options.timeoutSeconds * 1000);
  const secrets = [options.credentials.secretAccessKey, options.credentials.sessionToken].filter((secret): secret is string => !!secret);
  const encryption =
    options.serverSideEncryption?.kind === 'aws:kms'
      ? { ServerSideEncryption: 'aws:kms' as const, ...(options.serverSideEncryption.keyId ? { SSEKMSKeyId: options.serverSideEncryption.keyId } : {}) }
      : options.serverSideEncryption?.kind === 'AES256'
        ? { ServerSideEncryption: 'AES256' as const }
        : {};

  const agentOptions = { keepAlive: true, maxSockets: Math.max(16, 2 * queueSize), lookup: lookupLocalhostNames };
  const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const client = new S3Client({
    region: options.region,
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    forcePathStyle: options.pathStyle,
    credentials: { ...options.credentials },
    maxAttempts: ATTEMPTS,
    // The SDK's default since 3.729 sends CRC32 checksums on every upload (x-amz-checksum-*
    // and x-amz-sdk-checksum-algorithm headers, aws-chunked trailers for streams) and asks
    // for them in answers (x-amz-checksum-mode). Many S3-compatible providers (B2, R2, older
    // MinIO, s3rver) refuse those headers or trailers; send a checksum only where an
    // operation requires one, and do not insist on one in answers.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // connectionTimeout bounds the TCP/TLS connect; socketTimeout is the idle timeout of a
    // request's socket (requestTimeout, in this handler, bounds a whole request, which a
    // multi-GB part may rightly exceed). The agents are ours so that every request, the
    // Expect: 100-continue ones too, uses them and their lookup.
    requestHandler: new NodeHttpHandler({
      connectionTimeout: timeoutMs,
      socketTimeout: timeoutMs,
      httpAgent: new HttpAgent(agentOptions),
      httpsAgent: new HttpsAgent(agentOptions),
      logger: silent,
    }),
    logger: silent,
  });

  const objectKey = (key: string): string => {
    if (!key || key.includes('/')) throw new TypeError(`s3 target ${name}: a key is a plain name without slashes, not "${key}"`);
    return root + key;
  };

  /** The TargetError for what the SDK threw; an abort and a bug in our own code pass through. */
  const targetError = (operation: string, key: string | undefined, error: unknown): unknown => {
    if (isTargetError(error)) return error;
    if (!(error instanceof Error) || error.name === 'AbortError' || error instanceof TypeError || error instanceof RangeError || error instanceof ReferenceError) {
      return error;
    }
    const shape = error as SdkErrorShape;
    const status = shape.$metadata?.httpStatusCode;
    // The SDK names a service error after its S3 code (a HEAD answer has none: "Unknown");
    // Node names a network error in `code`. The SDK's HTTP handler renames a reset or a broken
    // pipe "TimeoutError" though nothing timed out (@smithy/node-http-handler's
    // NODEJS_TIMEOUT_ERROR_CODES): Node's code is what happened, and the peer is unreachable.
    const named = shape.name && !['Error', 'Unknown', 'UnknownError'].includes(shape.name) ? shape.name : undefined;
    const lost = shape.code !== undefined && UNREACHABLE_CODES.has(shape.code) ? shape.code : undefined;
    const code = shape.Code ?? lost ?? named ?? shape.code;
    const reason = classify(code ?? '', status);
    let detail = `${operation}${key ? ` ${key}` : ''}: ${code ?? (status ? `HTTP ${status}` : 'failed')}${code && status ? ` (HTTP ${status})` : ''}`;
    const message = (shape.message ?? '').split('\n')[0]!.slice(0, 300);
    if (message && message !== code && message !== 'UnknownError') detail += `: ${message}`;
    for (const secret of secrets) detail = detail.split(secret).join('[redacted]');
    detail = detail.replace(/AWS4-HMAC-SHA256 \S.*$/, 'AWS4-HMAC-SHA256 [redacted]');
    // A service error carries what the server sent back, which can echo the signed request
    // (AWS's SignatureDoesNotMatch has its CanonicalRequest, with a session token in it):
    // its code, status and message are in the detail; a network error is kept as the cause.
    return new TargetError(name, reason, detail, shape.$metadata ? {} : { cause: error });
  };

  const attempt = async <T>(operation: string, key: string | undefined, work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      throw targetError(operation, key, error);
    }
  };

  /** A real listing names its bucket; a web page or a proxy's answer parses to nothing. */
  const checkListing = (output: ListObjectsV2CommandOutput, operation: string): void => {
    if (output.Name !== bucket && output.MaxKeys === undefined) {
      throw new TargetError(name, 'protocol', `${operation}: the answer is not a listing of bucket ${bucket}`);
    }
  };

  return {
    name,
    kind: 's3',
    location: describeLocation(options),

    async check() {
      await attempt(`check bucket ${bucket}`, undefined, () => client.send(new HeadBucketCommand({ Bucket: bucket })));
      // HeadBucket passes on any server that answers 200; a listing shows it speaks S3.
      const listed = await attempt(`check bucket ${bucket}`, undefined, () => client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: root, Delimiter: '/', MaxKeys: 1 })));
      checkListing(listed, 'check');
    },

    async put(key, body, size, putOptions = {}) {
      const { signal, onProgress } = putOptions;
      const Key = objectKey(key);
      signal?.throwIfAborted();
      // Why the body side failed, when it did: the body's own error, a size that does not
      // match, or the abort. Upload only sees a stream that broke.
      let refusal: unknown;
      const refuse = (error: unknown) => {
        refusal ??= error;
        return refusal as Error;
      };
      const counted = new ExactSize(size, undefined, (message) => refuse(new TargetError(name, 'protocol', `put ${key}: ${message}`)));
      // Not pipeline(): Upload destroys `counted` when it stops reading (an AbortError), and
      // that must not pass for a failure of the body. Only the body's own error is one.
      const source = body();
      source.once('error', (error) => counted.destroy(refuse(error)));
      counted.once('close', () => source.destroy());
      // Upload reads `counted` and sees its errors; this keeps them from being unhandled.
      counted.on('error', () => undefined);
      source.pipe(counted);
      const onAbort = () => counted.destroy(refuse(signal?.reason ?? new DOMException('The upload was aborted', 'AbortError')));
      signal?.addEventListener('abort', onAbort, { once: true });
      const upload = new Upload({
        client,
        // S3 takes at most 10,000 parts: a larger body gets larger parts.
        partSize: Math.max(partSizeOption, Math.ceil(size / MAX_PARTS)),
        queueSize,
        leavePartsOnError: false,
        params: { Bucket: bucket, Key, Body: counted, ContentLength: size, ...encryption },
      });
      if (onProgress) upload.on('httpUploadProgress', ({ loaded }) => loaded !== undefined && onProgress(loaded));
      try {
        await upload.done();
      } catch (error) {
        // Upload has aborted the multipart upload (leavePartsOnError: false) before rejecting.
        throw refusal ?? targetError('put', key, error);
      } finally {
        signal?.removeEventListener('abort', onAbort);
        counted.destroy();
      }
      if (refusal !== undefined) {
        // Aborted once the whole body was read: the object may be complete; take it back.
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key })).catch(() => undefined);
        throw refusal;
      }
    },

    async get(key, getOptions = {}) {
      const Key = objectKey(key);
      const output = await attempt('get', key, () => client.send(new GetObjectCommand({ Bucket: bucket, Key }), { abortSignal: getOptions.signal }));
      const body = output.Body;
      if (!(body instanceof Readable)) throw new TargetError(name, 'protocol', `get ${key}: the answer has no body`);
      // A reset or a stall while the bytes arrive comes out as a TargetError too; an abort as itself.
      const out = new PassThrough();
      body.on('error', (error) => out.destroy((getOptions.signal?.aborted ? getOptions.signal.reason : targetError('get', key, error)) as Error));
      out.once('close', () => body.destroy());
      return body.pipe(out);
    },

    async stat(key) {
      const Key = objectKey(key);
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key }));
        return { key, size: head.ContentLength ?? 0, modified: head.LastModified ?? new Date(0) };
      } catch (error) {
        const failure = targetError('stat', key, error);
        if (!(isTargetError(failure) && failure.reason === 'missing')) throw failure;
        // A HEAD answer has no body to tell a missing object from a missing bucket, and a
        // missing bucket is a missing target, not a missing object: ask the bucket.
        await attempt('stat', key, () => client.send(new HeadBucketCommand({ Bucket: bucket })));
        return undefined;
      }
    },

    async list(prefix = '') {
      const found: StoredObject[] = [];
      let token: string | undefined;
      do {
        const page = await attempt('list', undefined, () =>
          client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: root + prefix, Delimiter: '/', ...(token ? { ContinuationToken: token } : {}) })),
        );
        checkListing(page, 'list');
        for (const item of page.Contents ?? []) {
          if (!item.Key?.startsWith(root + prefix)) continue;
          found.push({ key: item.Key.slice(root.length), size: item.Size ?? 0, modified: item.LastModified ?? new Date(0) });
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
        if (page.IsTruncated && !token) throw new TargetError(name, 'protocol', 'list: a truncated listing without a continuation token');
      } while (token);
      return found;
    },

    async delete(key) {
      const Key = objectKey(key);
      try {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key }));
      } catch (error) {
        const failure = targetError('delete', key, error);
        if (isTargetError(failure) && failure.reason === 'missing' && (error as SdkErrorShape).name !== 'NoSuchBucket') return;
        throw failure;
      }
    },

    async clearDebris(startedBefore, key) {
      const only = key === undefined ? undefined : objectKey(key);
      let removed = 0;
      let keyMarker: string | undefined;
      let uploadIdMarker: string | undefined;
      for (;;) {
        const page = await attempt('clear debris', undefined, () =>
          client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: root, Delimiter: '/', KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker })),
        );
        if (page.Bucket !== bucket && page.MaxUploads === undefined) {
          throw new TargetError(name, 'protocol', `clear debris: the answer is not a list of the uploads in bucket ${bucket}`);
        }
        for (const upload of page.Uploads ?? []) {
          if (!upload.Key || !upload.UploadId || !upload.Initiated || upload.Initiated >= startedBefore) continue;
          if (only !== undefined && upload.Key !== only) continue;
          const { Key, UploadId } = upload;
          try {
            await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key, UploadId }));
            removed += 1;
          } catch (error) {
            // Aborted meanwhile by someone else (the upload's own clean-up): gone all the same.
            if ((error as SdkErrorShape).name !== 'NoSuchUpload') throw targetError('clear debris', Key.slice(root.length), error);
          }
        }
        if (!page.IsTruncated) return removed;
        if (!page.NextKeyMarker && !page.NextUploadIdMarker) throw new TargetError(name, 'protocol', 'clear debris: a truncated listing without markers');
        keyMarker = page.NextKeyMarker;
        uploadIdMarker = page.NextUploadIdMarker;
      }
    },

    async close() {
      client.destroy();
    },
  };
}
