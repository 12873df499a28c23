import { Transform, type TransformCallback } from 'node:stream';

/**
 * Passes a body through and fails it unless exactly `size` bytes pass: an archive that
 * changed size between its stat and its upload is not the archive that was verified, and
 * must not reach a target as if it were.
 */
export class ExactSize extends Transform {
  private seen = 0;

  constructor(
    private readonly size: number,
    private readonly onProgress?: (bytes: number) => void,
    /** The error for a body of another size (a kind's TargetError); a plain Error by default. */
    private readonly refuse: (message: string) => Error = (message) => new Error(message),
  ) {
    super();
  }

  get bytes(): number {
    return this.seen;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.size) {
      callback(this.refuse(`the body is longer than the ${this.size} bytes announced`));
      return;
    }
    this.onProgress?.(this.seen);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    callback(this.seen === this.size ? null : this.refuse(`the body ended after ${this.seen} of the ${this.size} bytes announced`));
  }
}
