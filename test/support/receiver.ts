import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** The request target: path and query. */
  readonly path: string;
}

/**
 * How the receiver answers one request: a status; 'hang' to never answer; or a status with
 * headers (a Location) and a body of `bodyBytes` bytes, streamed as fast as the client reads.
 */
export type Answer = number | 'hang' | { readonly status: number; readonly headers?: Record<string, string>; readonly bodyBytes?: number };

const CHUNK = Buffer.alloc(64 * 1024, 'x');

/**
 * A local webhook receiver. `answer` decides each response (`count` is 1 for the first
 * request). Everything received is kept for the test to check, and `bodyBytesWritten` counts
 * the response body bytes the receiver managed to hand to its socket.
 */
export async function startReceiver(answer: (count: number, path: string) => Answer = () => 200): Promise<{
  url: string;
  received: Received[];
  bodyBytesWritten(): number;
  close(): Promise<void>;
}> {
  const received: Received[] = [];
  let written = 0;
  const server: Server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body, path: request.url ?? '' });
      const reply = answer(received.length, request.url ?? '');
      if (reply === 'hang') return;
      if (typeof reply === 'number') return void response.writeHead(reply).end();
      const total = reply.bodyBytes ?? 0;
      response.writeHead(reply.status, { ...reply.headers, ...(total > 0 ? { 'content-length': String(total) } : {}) });
      let left = total;
      let closed = false;
      response.on('close', () => (closed = true));
      const pump = (): void => {
        while (left > 0 && !closed) {
          const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
          left -= chunk.length;
          const more = response.write(chunk, (error) => {
            if (!error) written += chunk.length;
          });
          if (!more) return void response.once('drain', pump);
        }
        if (!closed) response.end();
      };
      pump();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    bodyBytesWritten: () => written,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
