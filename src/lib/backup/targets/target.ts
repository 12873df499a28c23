import type { Readable } from 'node:stream';
import { LicenseServerError } from '../../errors.js';

/**
 * The one contract every off-site target kind keeps (file, sftp, s3), as Litestream's
 * replica clients do: the backup code above it (replicate.ts) never knows which kind it
 * copies to, and test/lib/backup/targets/contract.ts runs one suite against each kind.
 *
 * Keys are names relative to the target's own root (its directory, or its bucket prefix):
 * `<backup id>.backup.tar.gz[.enc]` and `<backup id>.backup.json`, no slashes. A target
 * never shows a half-written object under its key: an upload goes to a temporary name (or
 * an S3 multipart upload) and appears under its key only once complete. What an interrupted
 * upload leaves is debris: never listed, and removed by clearDebris.
 */
export type TargetKind = 'file' | 'sftp' | 's3';

export interface StoredObject {
  readonly key: string;
  readonly size: number;
  readonly modified: Date;
}

export interface PutOptions {
  /** Stops the upload; what it wrote so far is removed (or left as debris if that fails). */
  readonly signal?: AbortSignal;
  /** Bytes sent so far, for progress. */
  readonly onProgress?: (bytes: number) => void;
}

export interface BackupTarget {
  readonly name: string;
  readonly kind: TargetKind;
  /** Where the target is, safe to print and log: never a credential. */
  readonly location: string;
  /**
   * Checks the target can be used: reachable, the credentials and host key accepted, the
   * bucket or directory there. Throws a TargetError.
   */
  check(): Promise<void>;
  /**
   * Streams `size` bytes from `body()` to `key`, replacing what is there. The object appears
   * under `key` only when complete; a body shorter or longer than `size` is an error and
   * leaves nothing under `key`. `body` may be called again to start over (a retry).
   */
  put(key: string, body: () => Readable, size: number, options?: PutOptions): Promise<void>;
  /** The object's bytes as a stream; TargetError reason 'missing' when there is none. */
  get(key: string, options?: { readonly signal?: AbortSignal }): Promise<Readable>;
  /** The object's size and time, or undefined when there is none. */
  stat(key: string): Promise<StoredObject | undefined>;
  /** The complete objects whose keys start with `prefix` (all when empty), in no set order. */
  list(prefix?: string): Promise<StoredObject[]>;
  /** Removes an object; removing one that is not there is no error. */
  delete(key: string): Promise<void>;
  /**
   * Removes what interrupted uploads left (temporary files, incomplete multipart uploads)
   * that was started before `startedBefore`, so that an upload running now is left alone;
   * with `key`, only what uploads to that key left. Returns how many it removed. A caller
   * that holds the copy's claim (copies.ts) clears its key's debris at any age: no one else
   * uploads to that key meanwhile.
   */
  clearDebris(startedBefore: Date, key?: string): Promise<number>;
  /** Ends connections; the target is unusable afterwards. */
  close(): Promise<void>;
}

/**
 * Why a target failed, as an operator acts on it:
 * - unreachable: connection refused or reset, DNS, TLS; try again later.
 * - timeout: no answer within the target's timeout (a slow or hung server).
 * - auth: credentials refused (S3 InvalidAccessKeyId/SignatureDoesNotMatch/AccessDenied, SSH auth).
 * - host-key: the SFTP server's host key is unknown or not the pinned one. Never accepted.
 * - missing: the bucket, directory or object is not there.
 * - full: no space (ENOSPC, SFTP quota, S3 EntityTooLarge/QuotaExceeded).
 * - protocol: an answer that makes no sense (garbage, a size or checksum that does not match).
 */
export type TargetFailure = 'unreachable' | 'timeout' | 'auth' | 'host-key' | 'missing' | 'full' | 'protocol';

export class TargetError extends LicenseServerError {
  constructor(
    readonly target: string,
    readonly reason: TargetFailure,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(reason === 'auth' || reason === 'host-key' ? 'TARGET_AUTH_FAILED' : 'TARGET_UNAVAILABLE', `target ${target}: ${detail}`, options);
  }
}

export function isTargetError(error: unknown): error is TargetError {
  return error instanceof TargetError;
}
