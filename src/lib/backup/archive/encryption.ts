import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { LicenseServerError } from '../../errors.js';

/**
 * Encrypted backups (docs/backup-format.md, "Encryption"): a 44-byte header, then the
 * plaintext in chunks, each sealed with AES-256-GCM under a per-file key, its nonce the
 * chunk's index and a final-chunk flag (the STREAM construction of Hoang, Reyhanitabar,
 * Rogaway and Vizár), the header as associated data. Reordered, truncated or appended
 * chunks fail authentication; a wrong key is recognised from the header's key check value
 * before any chunk is read. No plaintext leaves a chunk before its tag has been checked.
 */
export const MAGIC = Buffer.from('LSBK', 'ascii');
export const ENCRYPTION_VERSION = 1;
export const HEADER_LENGTH = 44;
export const TAG_LENGTH = 16;
export const DEFAULT_CHUNK_SIZE = 1024 * 1024;
/** The chunk sizes a reader accepts (and a writer may use): 1 KiB to 64 MiB. */
export const MIN_CHUNK_SIZE = 1024;
export const MAX_CHUNK_SIZE = 64 * 1024 * 1024;
const FILE_KEY_INFO = 'license-server/v1/backup-file-key';
const KEY_CHECK_LABEL = 'license-server/v1/backup-key-check';

function fileKey(key: Buffer, salt: Uint8Array): Buffer {
  return Buffer.from(hkdf(sha256, key, salt, new TextEncoder().encode(FILE_KEY_INFO), 32));
}

/** HMAC-SHA256(key, label || salt), first 16 bytes: tells a wrong key without revealing it. */
export function keyCheckValue(key: Buffer, salt: Uint8Array): Buffer {
  return createHmac('sha256', key).update(KEY_CHECK_LABEL, 'utf8').update(salt).digest().subarray(0, 16);
}

function nonce(index: number, final: boolean): Buffer {
  const bytes = Buffer.alloc(12);
  bytes.writeBigUInt64BE(BigInt(index), 0);
  bytes.writeUInt32BE(final ? 1 : 0, 8);
  return bytes;
}

function requireKey(key: Buffer): void {
  if (!Buffer.isBuffer(key) || key.length !== 32) throw new TypeError('backup key: expected 32 bytes');
}

export class EncryptStream extends Transform {
  private readonly header: Buffer;
  private readonly key: Buffer;
  private readonly chunkSize: number;
  private pending: Buffer[] = [];
  private pendingLength = 0;
  private index = 0;

  constructor(key: Buffer, chunkSize = DEFAULT_CHUNK_SIZE) {
    super();
    requireKey(key);
    if (!Number.isInteger(chunkSize) || chunkSize < MIN_CHUNK_SIZE || chunkSize > MAX_CHUNK_SIZE) {
      throw new RangeError(`backup chunk size: expected ${MIN_CHUNK_SIZE} to ${MAX_CHUNK_SIZE} bytes`);
    }
    const salt = randomBytes(16);
    const header = Buffer.alloc(HEADER_LENGTH);
    MAGIC.copy(header, 0);
    header.writeUInt8(ENCRYPTION_VERSION, 4);
    salt.copy(header, 8);
    keyCheckValue(key, salt).copy(header, 24);
    header.writeUInt32BE(chunkSize, 40);
    this.header = header;
    this.key = fileKey(key, salt);
    this.chunkSize = chunkSize;
    this.push(header);
  }

  override _transform(data: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.pending.push(data);
    this.pendingLength += data.length;
    // Strictly more than a chunk: the last full chunk is held back, as it may be the final one.
    while (this.pendingLength > this.chunkSize) {
      const all = Buffer.concat(this.pending);
      this.push(this.seal(all.subarray(0, this.chunkSize), false));
      const rest = all.subarray(this.chunkSize);
      this.pending = [rest];
      this.pendingLength = rest.length;
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    this.push(this.seal(Buffer.concat(this.pending), true));
    this.pending = [];
    done();
  }

  private seal(plaintext: Buffer, final: boolean): Buffer {
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce(this.index, final));
    cipher.setAAD(this.header);
    const sealed = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    this.index += 1;
    return sealed;
  }
}

export class DecryptStream extends Transform {
  private readonly masterKey: Buffer;
  private header: Buffer | undefined;
  private key: Buffer | undefined;
  private recordSize = 0;
  private pending: Buffer[] = [];
  private pendingLength = 0;
  private index = 0;

  constructor(key: Buffer) {
    super();
    requireKey(key);
    this.masterKey = key;
  }

  override _transform(data: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    try {
      this.pending.push(data);
      this.pendingLength += data.length;
      if (!this.header) {
        if (this.pendingLength < HEADER_LENGTH) return done();
        const all = this.takeAll();
        this.readHeader(all.subarray(0, HEADER_LENGTH));
        this.keepRest(all.subarray(HEADER_LENGTH));
      }
      // A record is only known not to be the last one when more bytes follow it.
      if (this.pendingLength > this.recordSize) {
        let all = this.takeAll();
        while (all.length > this.recordSize) {
          this.push(this.open(all.subarray(0, this.recordSize), false));
          all = all.subarray(this.recordSize);
        }
        this.keepRest(all);
      }
      done();
    } catch (error) {
      done(error as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      if (!this.header) throw corrupt('it is shorter than its header');
      if (this.pendingLength < TAG_LENGTH) throw corrupt('it is truncated (the final chunk is missing)');
      // The writer ends an exact multiple of the chunk size with a full final chunk, so an
      // empty one after it is not its work: one encoding per plaintext (as age does).
      if (this.pendingLength === TAG_LENGTH && this.index > 0) throw corrupt('its final chunk is empty after a full one');
      this.push(this.open(this.takeAll(), true));
      done();
    } catch (error) {
      done(error as Error);
    }
  }

  private takeAll(): Buffer {
    const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    this.pending = [];
    this.pendingLength = 0;
    return all;
  }

  private keepRest(rest: Buffer): void {
    if (rest.length === 0) return;
    this.pending = [rest];
    this.pendingLength = rest.length;
  }

  /**
   * What needs no key is checked first (magic, version, reserved bytes, chunk size), so that
   * the key check value is left the only thing that can say "wrong key"; it cannot tell a
   * wrong key from a changed salt or check value, which the hint of BACKUP_WRONG_KEY says.
   */
  private readHeader(header: Buffer): void {
    if (!header.subarray(0, 4).equals(MAGIC)) {
      throw new LicenseServerError('BACKUP_INVALID', 'this is not an encrypted license-server backup (bad magic bytes)');
    }
    const version = header.readUInt8(4);
    // 0 was never a format: a changed byte, not a newer license-server.
    if (version === 0) throw corrupt('its encryption format byte is 0');
    if (version !== ENCRYPTION_VERSION) {
      throw new LicenseServerError('BACKUP_UNSUPPORTED', `backup encryption format ${version} is not supported (this license-server reads ${ENCRYPTION_VERSION})`);
    }
    if (header[5] !== 0 || header[6] !== 0 || header[7] !== 0) throw corrupt('its reserved header bytes are not zero');
    const chunkSize = header.readUInt32BE(40);
    if (chunkSize < MIN_CHUNK_SIZE || chunkSize > MAX_CHUNK_SIZE) {
      throw corrupt(`its chunk size ${chunkSize} is outside ${MIN_CHUNK_SIZE} to ${MAX_CHUNK_SIZE} bytes`);
    }
    const salt = header.subarray(8, 24);
    if (!timingSafeEqual(keyCheckValue(this.masterKey, salt), header.subarray(24, 40))) {
      throw new LicenseServerError('BACKUP_WRONG_KEY', 'backup was encrypted with a different key');
    }
    this.header = Buffer.from(header);
    this.key = fileKey(this.masterKey, salt);
    this.recordSize = chunkSize + TAG_LENGTH;
  }

  private open(record: Buffer, final: boolean): Buffer {
    const decipher = createDecipheriv('aes-256-gcm', this.key!, nonce(this.index, final));
    decipher.setAAD(this.header!);
    decipher.setAuthTag(record.subarray(record.length - TAG_LENGTH));
    const parts = [decipher.update(record.subarray(0, record.length - TAG_LENGTH))];
    try {
      parts.push(decipher.final());
    } catch {
      throw corrupt(`chunk ${this.index} failed authentication (damaged, reordered, truncated or appended to)`);
    }
    this.index += 1;
    return Buffer.concat(parts);
  }
}

function corrupt(reason: string): LicenseServerError {
  return new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: ${reason}`);
}

/** The first bytes of a backup file tell its kind: encrypted, gzip, or neither. */
export function sniff(first: Buffer): 'encrypted' | 'gzip' | 'unknown' {
  if (first.length >= 4 && first.subarray(0, 4).equals(MAGIC)) return 'encrypted';
  if (first.length >= 2 && first[0] === 0x1f && first[1] === 0x8b) return 'gzip';
  return 'unknown';
}
