import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LicenseServerError } from '../lib/errors.js';
import { requestIdOf } from './app.js';
import { limitConnections, type ConnectionLimits } from './connection-limits.js';
import { METRICS_CONTENT_TYPE, type DaemonMetrics } from './metrics.js';
import { headersTimeoutMs } from './server.js';

export interface MetricsListener {
  /** Where Prometheus scrapes: `http://host:port/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * The listener of server.metrics_port: `GET /metrics` and nothing else, without a token, so
 * that it can stay on loopback or a network only Prometheus reaches (docs/metrics.md). Every
 * other path is 404 and every other method 405, in the API's error shape; no route of the
 * API is reachable here. Its connections are held to the API listener's limits: headers
 * within the same time, and server.max_connections and server.max_connections_per_address
 * counted on their own.
 */
export async function listenForMetrics(
  metrics: DaemonMetrics,
  options: { host: string; port: number; log: (entry: Record<string, unknown>) => void; requestTimeout: number; limits: ConnectionLimits },
): Promise<MetricsListener> {
  const timeouts = {
    headersTimeout: headersTimeoutMs(options.requestTimeout),
    requestTimeout: options.requestTimeout * 1000,
    keepAliveTimeout: 5000,
    // Node's default looks every 30 s: a headers limit of 10 s would be kept 40 s.
    connectionsCheckingInterval: 1000,
  };
  const server = createServer(timeouts, (request, response) => {
    // The same rule as the API's answers: every answer, errors included, can be matched to a report.
    response.setHeader('X-Request-Id', requestIdOf(request));
    void answer(metrics, request, response).catch((error: unknown) => {
      options.log({ time: new Date().toISOString(), level: 'error', msg: 'metrics listener failed', error: error instanceof Error ? error.message.slice(0, 200) : String(error) });
      if (!response.headersSent) fail(response, 500, 'INTERNAL', 'internal error');
      else response.destroy();
    });
  });
  server.on('clientError', (_error, socket) => socket.destroy());
  limitConnections(server, options.limits, options.log, 'metrics');
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new LicenseServerError('LISTEN_FAILED', `cannot listen for metrics on ${options.host}:${options.port}: ${error.code ?? error.message}`)),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function answer(metrics: DaemonMetrics, request: IncomingMessage, response: ServerResponse): Promise<void> {
  request.resume();
  const path = (request.url ?? '').split('?', 1)[0];
  if (path !== '/metrics') return fail(response, 404, 'ROUTE_NOT_FOUND', 'this listener serves only /metrics');
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.setHeader('Allow', 'GET, HEAD');
    return fail(response, 405, 'METHOD_NOT_ALLOWED', `${request.method} is not allowed here; use GET`);
  }
  const body = Buffer.from(await metrics.render(), 'utf8');
  response.writeHead(200, {
    'Content-Type': METRICS_CONTENT_TYPE,
    'Content-Length': body.length,
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
  });
  response.end(request.method === 'HEAD' ? undefined : body);
}

function fail(response: ServerResponse, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { code, message, request_id: String(response.getHeader('X-Request-Id')) } });
  response.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
  });
  response.end(body);
}
