import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { LicenseServerError } from '../lib/errors.js';
import type { App } from './app.js';

export interface ListenOptions {
  readonly host: string;
  readonly port: number;
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
  /** Seconds, as the setting server.request_timeout. */
  readonly requestTimeout: number;
}

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  /**
   * Stops accepting, lets requests in flight finish for up to `graceMs`, then closes every
   * connection. Resolves when the listener is closed.
   */
  shutdown(graceMs?: number): Promise<void>;
}

export const DEFAULT_GRACE_MS = 8000;

export async function listen(app: App, options: ListenOptions): Promise<RunningServer> {
  const timeouts = {
    // A backstop only: the app answers a slow body itself with 408 at requestTimeout, and
    // Node's own timer firing first would cut that answer off.
    requestTimeout: (options.requestTimeout + 5) * 1000,
    headersTimeout: Math.min(10, options.requestTimeout) * 1000,
    keepAliveTimeout: 5000,
    // Node looks for expired requests every 30 s by default: far too late for a 10 s limit.
    connectionsCheckingInterval: 1000,
  };
  const server: Server = options.tls
    ? createHttpsServer({ ...timeouts, cert: options.tls.cert, key: options.tls.key }, app.handle)
    : createHttpServer(timeouts, app.handle);
  // Requests Node refuses before our handler sees them (malformed, headers too slow) still
  // get the API's error shape.
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable || (socket as Socket & { _httpMessage?: unknown })._httpMessage) {
      socket.destroy();
      return;
    }
    const timeout = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    const [status, code, message] = timeout
      ? [408, 'REQUEST_TIMEOUT', 'the request did not arrive in time']
      : error.code === 'HPE_HEADER_OVERFLOW' ? [431, 'INVALID_INPUT', 'the request headers are too large']
      : [400, 'INVALID_INPUT', 'the request is not valid HTTP'];
    const body = JSON.stringify({ error: { code, message } });
    socket.end(
      `HTTP/1.1 ${status} ${timeout ? 'Request Timeout' : status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new LicenseServerError('LISTEN_FAILED', `cannot listen on ${options.host}:${options.port}: ${error.code ?? error.message}`)),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `${options.tls ? 'https' : 'http'}://${host}:${port}`,
    port,
    shutdown: (graceMs = DEFAULT_GRACE_MS) => shutdown(server, app, graceMs),
  };
}

async function shutdown(server: Server, app: App, graceMs: number): Promise<void> {
  app.stopAccepting();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const deadline = Date.now() + graceMs;
  while (app.inFlight() > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    server.closeIdleConnections();
  }
  server.closeAllConnections();
  await closed;
  app.close();
}
