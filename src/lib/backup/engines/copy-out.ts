import { Readable } from 'node:stream';
import type pg from 'pg';

// Protocol message codes (PostgreSQL docs, "Message Formats").
const COPY_OUT_RESPONSE = 0x48;
const COPY_DATA = 0x64;
const ERROR_RESPONSE = 0x45;
const NOTICE_RESPONSE = 0x4e;
const NOTIFICATION_RESPONSE = 0x41;
const PARAMETER_STATUS = 0x53;
/**
 * Rows are handed on in blocks of this size, the dump's compression block: 1 MiB rather
 * than the archive's 2 MiB, to keep a backup's peak memory under 200 MiB with the blocks
 * in flight (the 4 KiB window makes the ratio the same).
 */
export const COPY_OUT_BLOCK = 1024 * 1024;
const BLOCK = COPY_OUT_BLOCK;

/**
 * `COPY ... TO STDOUT` as a readable stream of the rows' bytes, for `client.query(new
 * CopyOut(sql))`. The protocol handling follows pg-copy-streams' copy-to (take the socket
 * from pg for the copy, hand back what follows the CopyDone or an ErrorResponse); the
 * parsing does not: a dump gets one CopyData message per row, and slicing a Buffer per row
 * then joining them cost about 1.5 s of the main thread per GiB, the thread that also
 * hashes the dump. Here the rows' payloads are copied back to back into blocks the size of
 * a compression block, so that the compressor takes each as it is, with no second copy
 * (every byte allocated costs garbage collection: about a hundred full collections per
 * GiB in the CLI process, whose larger heap makes each dearer).
 */
export class CopyOut extends Readable {
  private connection: pg.Connection | undefined;
  private pgDataHandler: ((chunk: Buffer) => void) | undefined;
  private readonly onReadable = () => this.forward();
  /** Bytes of a message header split across socket reads. */
  private partial: Buffer = Buffer.alloc(0);
  /** The current message's code and how much of its content is still to come. */
  private code = 0;
  private remaining = 0;
  private wanted = false;
  /** Rows are copied into blocks of BLOCK bytes, each pushed once full: one allocation per block. */
  private block: Buffer | undefined;
  private filled = 0;
  private forwarding = false;
  private finished = false;

  constructor(private readonly text: string) {
    super();
  }

  submit(connection: pg.Connection): void {
    this.connection = connection;
    const socket = connection.stream;
    const listeners = socket.listeners('data');
    if (listeners.length !== 1) throw new Error('pg connection in an unexpected state for COPY');
    this.pgDataHandler = listeners[0] as (chunk: Buffer) => void;
    socket.removeListener('data', this.pgDataHandler!);
    socket.pause();
    socket.on('readable', this.onReadable);
    connection.query(this.text);
  }

  override _read(): void {
    this.wanted = true;
    this.forward();
  }

  private forward(): void {
    if (this.forwarding || !this.wanted || !this.connection || this.finished) return;
    this.forwarding = true;
    let chunk: Buffer | null;
    while (this.wanted && !this.finished && (chunk = this.connection.stream.read() as Buffer | null) !== null) this.parse(chunk);
    this.forwarding = false;
  }

  private parse(input: Buffer): void {
    const chunk = this.partial.length > 0 ? Buffer.concat([this.partial, input]) : input;
    this.partial = Buffer.alloc(0);
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const end = Math.min(chunk.length, at + this.remaining);
        if (this.code === COPY_DATA) this.keep(chunk, at, end);
        this.remaining -= end - at;
        at = end;
        if (this.remaining === 0 && !this.continues()) return this.finish(chunk.subarray(at), false);
        continue;
      }
      if (chunk.length - at < 5) {
        this.partial = chunk.subarray(at);
        break;
      }
      const code = chunk[at]!;
      if (code === ERROR_RESPONSE) return this.finish(chunk.subarray(at), true);
      this.code = code;
      this.remaining = chunk.readUInt32BE(at + 1) - 4;
      at += 5;
      if (this.remaining === 0 && !this.continues()) return this.finish(chunk.subarray(at), false);
    }
  }

  /** Copies row bytes into the current block, pushing each block as it fills. */
  private keep(chunk: Buffer, start: number, end: number): void {
    while (start < end) {
      this.block ??= Buffer.allocUnsafe(BLOCK);
      const copied = chunk.copy(this.block, this.filled, start, end);
      this.filled += copied;
      start += copied;
      if (this.filled === BLOCK) {
        this.wanted = this.push(this.block);
        this.block = undefined;
        this.filled = 0;
      }
    }
  }

  /** Messages that may come between CopyData ones; anything else (CopyDone) ends the copy. */
  private continues(): boolean {
    return (
      this.code === COPY_DATA ||
      this.code === COPY_OUT_RESPONSE ||
      this.code === NOTICE_RESPONSE ||
      this.code === NOTIFICATION_RESPONSE ||
      this.code === PARAMETER_STATUS
    );
  }

  /** The copy is over (CopyDone, or an error pg will report): pg reads the rest. */
  private finish(rest: Buffer, failed: boolean): void {
    this.finished = true;
    if (this.block && this.filled > 0) this.push(this.block.subarray(0, this.filled));
    this.block = undefined;
    const socket = this.connection!.stream;
    socket.removeListener('readable', this.onReadable);
    socket.addListener('data', this.pgDataHandler!);
    this.pgDataHandler!(rest);
    // pg's own 'data' handling may pause the socket; it is resumed once this returns.
    process.nextTick(() => socket.resume());
    // After an ErrorResponse pg calls handleError, which ends this stream with the error.
    if (!failed) this.push(null);
  }

  /** pg calls these as it reads what follows the copy. */
  handleError(error: Error): void {
    this.destroy(error);
  }

  handleCommandComplete(): void {}

  handleReadyForQuery(): void {}
}
