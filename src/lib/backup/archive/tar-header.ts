/**
 * The ustar framing of our archives, written directly so that an entry compressed ahead of
 * time (the PostgreSQL dump) can be placed between its header and its padding without
 * passing through a tar packer. The bytes are those tar-stream writes for the same entry
 * (test/lib/backup/tar-header.test.ts holds them equal), so archives read as before.
 */
const BLOCK = 512;
/** A tar file ends with two 512-byte blocks of zeros (POSIX.1-1988 ustar). */
export const TAR_END = Buffer.alloc(2 * BLOCK);

export interface TarFile {
  /** ASCII, at most 100 bytes (our entry names are fixed and short). */
  readonly name: string;
  readonly size: number;
  readonly mode: number;
  readonly mtime: Date;
}

export function tarHeader(file: TarFile): Buffer {
  if (!/^[\x20-\x7e]{1,100}$/.test(file.name)) throw new RangeError(`tar entry name not supported: ${JSON.stringify(file.name)}`);
  const header = Buffer.alloc(BLOCK);
  header.write(file.name, 0, 'ascii');
  header.write(octal(file.mode & 0o7777, 6), 100, 'ascii');
  header.write(octal(0, 6), 108, 'ascii');
  header.write(octal(0, 6), 116, 'ascii');
  writeSize(header, file.size);
  header.write(octal(Math.floor(file.mtime.getTime() / 1000), 11), 136, 'ascii');
  header[156] = 0x30; // '0': a regular file
  header.write('ustar\u000000', 257, 'ascii');
  header.write(octal(0, 6), 329, 'ascii');
  header.write(octal(0, 6), 337, 'ascii');
  // The checksum is the byte sum with its own field counted as eight spaces.
  let sum = 8 * 0x20;
  for (let i = 0; i < BLOCK; i += 1) if (i < 148 || i >= 156) sum += header[i]!;
  header.write(octal(sum, 6), 148, 'ascii');
  return header;
}

/** The zeros that fill an entry of `size` bytes up to its next 512-byte block. */
export function tarPadding(size: number): Buffer {
  return Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);
}

/** `digits` octal digits and a space, as tar-stream writes numeric fields. */
function octal(value: number, digits: number): string {
  return `${value.toString(8).padStart(digits, '0')} `;
}

function writeSize(header: Buffer, size: number): void {
  if (size.toString(8).length <= 11) {
    header.write(octal(size, 11), 124, 'ascii');
    return;
  }
  // Past 8 GiB: GNU base-256, the high bit of the first byte set.
  header[124] = 0x80;
  let rest = size;
  for (let i = 11; i > 0; i -= 1) {
    header[124 + i] = rest % 256;
    rest = Math.floor(rest / 256);
  }
}
