import { LicenseServerError } from './errors.js';

/** A short reason for a failed file operation, without a stack or the syscall noise. */
export function describeFsError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      return 'no such file or directory';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    case 'ENOTDIR':
      return 'a parent is not a directory';
    case 'ENOSPC':
    case 'SQLITE_FULL':
      return 'no space left on the device';
    case 'EDQUOT':
      return 'disk quota exceeded';
    case 'EIO':
      return 'input/output error (a failing or removed medium)';
    case 'EROFS':
    case 'SQLITE_READONLY':
      return 'read-only file system';
    default:
      if (code?.startsWith('SQLITE_IOERR')) return 'input/output error (a failing or removed medium)';
      return error instanceof Error ? error.message : String(error);
  }
}

// The device refused the write; anything else (a bug, a missing file) is not reported as one.
const DEVICE_REFUSALS = new Set(['ENOSPC', 'EDQUOT', 'EIO', 'EROFS', 'SQLITE_FULL', 'SQLITE_READONLY']);

/** Whether `error` is a file system (or SQLite on it) out of space, over quota, failing or read-only. */
export function isDeviceRefusal(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && (DEVICE_REFUSALS.has(code) || code.startsWith('SQLITE_IOERR'));
}

/**
 * FILE_WRITE_FAILED for a device refusal, `${what}: ${reason}` (say which directory); any
 * other error is returned as it is, so that a bug still reads as one.
 */
export function asWriteFailure(error: unknown, what: string): unknown {
  if (error instanceof LicenseServerError || !isDeviceRefusal(error)) return error;
  return new LicenseServerError('FILE_WRITE_FAILED', `${what}: ${describeFsError(error)}`, { cause: error });
}
