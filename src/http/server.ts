import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { LicenseServerError } from '../lib/errors.js';
import type { App } from './app.js';
import { limitConnections, type ConnectionLimits } from './connection-limits.js';

export interface ListenOptions {
  readonly host: string;
  readonly port: number;
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
  /** Seconds, as the setting server.request_timeout. */
  readonly requestTimeout: number;
  /** server.max_connections and server.max_connections_per_address. */
  readonly limits: ConnectionLimits;
}

/**
 * The time a connection has for its request's headers, in ms: Node counts it from the moment
 * the connection opened (so a connection that sends nothing is closed by it too), or over TLS
 * from the end of the handshake, which gets as long.
 */
export function headersTimeoutMs(requestTimeoutSeconds: number): number {
  return Math.min(10, requestTimeoutSeconds) * 1000;
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
    headersTimeout: headersTimeoutMs(options.requestTimeout),
    keepAliveTimeout: 5000,
    // Node looks for expired requests every 30 s by default: far too late for a 10 s limit.
    connectionsCheckingInterval: 1000,
  };
  const server: Server = options.tls
    ? createHttpsServer({ ...timeouts, handshakeTimeout: timeouts.headersTimeout, cert: options.tls.cert, key: options.tls.key }, app.handle)
    : createHttpServer(timeouts, app.handle);
  limitConnections(server, options.limits, app.log, 'api');
  // A handshake that failed or did not finish in time: no HTTP answer can reach that client,
  // so the connection is closed here, before the clientError below (which https calls next)
  // would write one into it.
  server.prependListener('tlsClientError', (_error: Error, socket: Socket) => socket.destroy());
  // Connections still in their TLS handshake are not HTTP's yet, so closeAllConnections()
  // misses them, and server.close() would wait for their handshake limit at shutdown.
  const raw = new Set<Socket>();
  if (options.tls) {
    server.on('connection', (socket: Socket) => {
      raw.add(socket);
      socket.once('close', () => raw.delete(socket));
    });
  }
  // Requests Node refuses still get the API's error shape: those refused before our handler
  // saw them (malformed, headers too large or too slow) as raw bytes, and those it
  // dispatched and then failed in the body (an unusual Transfer-Encoding, a bad chunk)
  // through their own response, so that the request log has them once, with that status.
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const refusal = refusalOf(error);
    const pending = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (pending) {
      if (!pending.headersSent && !pending.req.complete && socket.writable) {
        // Only the request being read can be incomplete: this answer is its own, under the id
        // the app gave it (and logs it with).
        const requestId = String(pending.getHeader('X-Request-Id') ?? randomUUID());
        const body = JSON.stringify({ error: { code: refusal.code, message: refusal.message, request_id: requestId } });
        pending.writeHead(refusal.status, {
          'Content-Type': 'application/json; charset=utf-8',
          'Content-Length': Buffer.byteLength(body),
          'Cache-Control': 'no-store',
          'X-Content-Type-Options': 'nosniff',
          Connection: 'close',
        });
        pending.end(body);
      } else if (pending.writableEnded && socket.writable) {
        // Its answer (the app's own refusal) is written: let it go out, then close.
        socket.destroySoon();
      } else {
        // An answer half sent, or others queued behind it: nothing can be added safely.
        socket.destroy();
      }
      return;
    }
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    // Not parsed, so no id of the caller's can be trusted: a fresh one, in the answer and in
    // a log line of its own, so that these too can be matched to the log.
    const requestId = randomUUID();
    const body = JSON.stringify({ error: { code: refusal.code, message: refusal.message, request_id: requestId } });
    socket.end(
      `HTTP/1.1 ${refusal.status} ${refusal.reason}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
    app.log({ time: new Date().toISOString(), level: 'info', msg: 'request', request_id: requestId, route: 'unparsed', status: refusal.status, remote: socket.remoteAddress });
    // Closed once the answer is written, as Node's own refusals are: a client that never
    // closes its end (a flood does not) would otherwise keep this descriptor for ever.
    socket.destroySoon();
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
    shutdown: (graceMs = DEFAULT_GRACE_MS) => shutdown(server, app, graceMs, raw),
  };
}

async function shutdown(server: Server, app: App, graceMs: number, raw: ReadonlySet<Socket>): Promise<void> {
  app.stopAccepting();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const deadline = Date.now() + graceMs;
  while (app.inFlight() > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    server.closeIdleConnections();
  }
  const cutOff = app.inFlight();
  app.log(
    cutOff === 0
      ? { time: new Date().toISOString(), level: 'info', msg: 'drained' }
      : { time: new Date().toISOString(), level: 'warn', msg: 'grace period over', requests_cut_off: cutOff, grace_ms: graceMs },
  );
  server.closeAllConnections();
  for (const socket of raw) socket.destroy();
  await closed;
  app.close();
}

function refusalOf(error: NodeJS.ErrnoException): { status: number; reason: string; code: string; message: string } {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, reason: 'Request Timeout', code: 'REQUEST_TIMEOUT', message: 'the request did not arrive in time' };
  if (error.code === 'HPE_HEADER_OVERFLOW') return { status: 431, reason: 'Request Header Fields Too Large', code: 'INVALID_INPUT', message: 'the request headers are too large' };
  return { status: 400, reason: 'Bad Request', code: 'INVALID_INPUT', message: 'the request is not valid HTTP' };
}
