import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';

/** Bytes of a webhook's answer read before hanging up: only its status counts. */
export const RESPONSE_READ_LIMIT = 4096;

export interface PostOptions {
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** For the whole exchange; an answer whose status arrived counts even if its body is slow. */
  readonly timeoutMs: number;
  readonly lookup: LookupFunction;
}

export interface PostAnswer {
  readonly status: number;
  /** The Location header of a redirect, as given (never followed). */
  readonly location?: string;
}

export class PostTimeoutError extends Error {
  constructor() {
    super('timed out');
    this.name = 'TimeoutError';
  }
}

/**
 * One POST with node:http(s): a fresh connection (no pooled socket, so every connection goes
 * through `lookup`), no redirect followed, at most RESPONSE_READ_LIMIT bytes of the answer
 * read before the connection is destroyed. User and password in the URL go as Basic
 * authentication.
 */
export function postOnce(options: PostOptions): Promise<PostAnswer> {
  return new Promise((resolve, reject) => {
    const send = options.url.protocol === 'https:' ? httpsRequest : httpRequest;
    let answer: PostAnswer | undefined;
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      if (answer) resolve(answer);
      else reject(error);
    };
    const request = send(options.url, {
      method: 'POST',
      headers: { ...options.headers, 'content-length': String(Buffer.byteLength(options.body)) },
      agent: false,
      lookup: options.lookup,
    });
    timer = setTimeout(() => finish(new PostTimeoutError()), options.timeoutMs).unref();
    request.on('error', (error) => finish(error));
    request.on('response', (response) => {
      const location = response.headers.location;
      answer = { status: response.statusCode ?? 0, ...(location === undefined ? {} : { location }) };
      let read = 0;
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= RESPONSE_READ_LIMIT) finish();
      });
      response.on('end', () => finish());
      response.on('error', () => finish());
    });
    request.end(options.body);
  });
}
