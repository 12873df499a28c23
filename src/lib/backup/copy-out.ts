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
 * `COPY ... TO STDOUT` as a readable stream of the rows' bytes, for `client.query(new
 * CopyOut(sql))`. The protocol handling follows pg-copy-streams' copy-to (take the socket
 * from pg for the copy, hand back what follows the CopyDone or an ErrorResponse); the
 * parsing does not: a dump gets one CopyData message per row, and slicing a Buffer per row
 * then joining them cost about 1.5 s of the main thread per GiB, the thread that also
 * hashes the dump. Here each socket read becomes one Buffer, the rows' payloads copied into
 * it back to back.
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
  private forwarding = false;
  private finished = false;
  rowCount = 0;

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
    const out = Buffer.allocUnsafe(chunk.length);
    let written = 0;
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const end = Math.min(chunk.length, at + this.remaining);
        if (this.code === COPY_DATA) written += chunk.copy(out, written, at, end);
        this.remaining -= end - at;
        at = end;
        if (this.remaining === 0 && !this.continues()) return this.finish(out, written, chunk.subarray(at), false);
        continue;
      }
      if (chunk.length - at < 5) {
        this.partial = chunk.subarray(at);
        break;
      }
      const code = chunk[at]!;
      if (code === ERROR_RESPONSE) return this.finish(out, written, chunk.subarray(at), true);
      this.code = code;
      this.remaining = chunk.readUInt32BE(at + 1) - 4;
      at += 5;
      if (this.remaining === 0 && !this.continues()) return this.finish(out, written, chunk.subarray(at), false);
    }
    if (written > 0) this.wanted = this.push(out.subarray(0, written));
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
  private finish(out: Buffer, written: number, rest: Buffer, failed: boolean): void {
    this.finished = true;
    if (written > 0) this.push(out.subarray(0, written));
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

  handleCommandComplete(message: { text?: string }): void {
    const match = /COPY (\d+)/.exec(message?.text ?? '');
    if (match) this.rowCount = Number(match[1]);
  }

  handleReadyForQuery(): void {}
}
