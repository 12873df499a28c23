import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { pipeline, type Readable } from 'node:stream';
import { authenticateAdminToken, scopeAllows, type AuthenticatedAdmin, type Scope } from '../lib/admin-tokens.js';
import { LicenseServerError } from '../lib/errors.js';
import { describe } from '../lib/validate.js';
import type { Database } from '../lib/storage/types.js';
import { readJsonObject, readRawBody } from './body.js';
import { toErrorResponse } from './errors.js';
import { RateLimiter } from './rate-limit.js';
import { AdminGate } from './admin-gate.js';
import { jsonInSlices } from './json-in-slices.js';
import { Router, type Reply, type Route } from './router.js';
import type { ServingState } from './serving-state.js';
import { longestGapSeconds } from '../lib/backup/drill-schedule.js';
import { adminRoutes } from './routes/admin.js';
import { importRoutes } from './routes/imports.js';
import { lifecycleRoutes } from './routes/lifecycle.js';
import { adminPageRoutes } from './routes/admin-page.js';
import { whoamiRoutes } from './routes/whoami.js';
import { backupRoutes } from './routes/backups.js';
import { clientRoutes } from './routes/client.js';
import { healthRoutes } from './routes/health.js';
import { signingKeyRoutes } from './routes/signing-keys.js';
import { notificationRoutes } from './routes/notifications.js';
import { openApiRoutes } from './routes/openapi.js';
import { metricsRoutes } from './routes/metrics.js';
import { tokenRoutes } from './routes/tokens.js';
import { attentionRoutes } from './routes/attention.js';
import { listCountRoutes } from './routes/list-counts.js';
import { searchRoutes } from './routes/search.js';
import { bulkRoutes } from './routes/bulk.js';
import { DaemonMetrics } from './metrics.js';
import type { Maintenance, RouteDependencies } from './route-dependencies.js';

export interface AppDependencies {
  readonly state: ServingState;
  /** One JSON object per line; never handed a token, license key or key material. */
  readonly log: (entry: Record<string, unknown>) => void;
  readonly clock?: () => Date;
  readonly toolVersion: string;
  readonly scheduler?: { status(): Promise<unknown> };
  /** The daemon's metrics (metrics.ts); made here, without the process metrics, when absent. */
  readonly metrics?: DaemonMetrics;
}

export interface App {
  readonly handle: (request: IncomingMessage, response: ServerResponse) => void;
  /** Requests being handled right now, for a drain on shutdown. */
  inFlight(): number;
  /** From now on every new request gets 503 SHUTTING_DOWN. */
  stopAccepting(): void;
  close(): void;
  /** The daemon's log, for the listener's own lines (the drain at shutdown). */
  readonly log: (entry: Record<string, unknown>) => void;
  readonly metrics: DaemonMetrics;
}

/**
 * The request handler, built apart from any listening socket so that tests can drive it
 * (conventions section 2). Order per request: route (404/405), shutting down (503),
 * rate limit for client routes (429), admin token (401), body (415/413/408/400), handler.
 */
export function createApp(deps: AppDependencies): App {
  const clock = deps.clock ?? (() => new Date());
  const { state } = deps;
  const metrics = deps.metrics ?? new DaemonMetrics({ clock });
  metrics.watch({
    database: () => state.figureReads,
    pools: () => (state.adminReads === state.db ? [['daemon', state.db] as const] : [['daemon', state.db] as const, ['admin', state.adminReads] as const]),
    targets: () => state.config.settings.backup.targets.map((target) => target.name),
    refreshSeconds: () => state.config.settings.server.metricsStoreRefresh,
    backupMaxAgeSeconds: () => {
      const ms = state.config.settings.backup.maxAgeMs;
      return ms === undefined ? undefined : ms / 1000;
    },
    replication: () => state.replicator?.status(),
    drills: async () => (await import('../lib/backup/drill-history.js')).readDrillHistory(state.config.settings.backup.path),
    drillIntervalSeconds: () => (state.config.settings.backup.drill.enabled ? longestGapSeconds(state.config.settings.backup.drill.schedule) : undefined),
    walArchiving: async () => (state.db.engine === 'postgres' ? (await import('../lib/backup/wal-archiving.js')).readWalArchiving(state.figureReads) : undefined),
    readFailed: (error) =>
      deps.log({ time: new Date().toISOString(), level: 'warn', msg: 'the store\'s figures for /metrics could not be read; they keep the last good read', error: error instanceof Error ? error.message.slice(0, 200) : String(error) }),
  });
  let inFlight = 0;
  let accepting = true;
  let paused: number | undefined;
  let replacedLogged = false;
  const maintenance: Maintenance = {
    async begin(retryAfter, keep, timeoutMs) {
      paused = retryAfter;
      const deadline = Date.now() + timeoutMs;
      while (inFlight > keep && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      if (inFlight > keep) {
        paused = undefined;
        throw new LicenseServerError('RESTORE_IN_PROGRESS', `requests in flight did not finish within ${timeoutMs / 1000} s; nothing was changed`);
      }
    },
    end() {
      paused = undefined;
    },
  };
  const routeDeps: RouteDependencies = {
    get db() {
      return state.db;
    },
    get settings() {
      return state.config.settings;
    },
    clock,
    state,
    maintenance,
    toolVersion: deps.toolVersion,
    log: deps.log,
    scheduler: deps.scheduler,
    metrics,
  };
  const router = new Router(routesByAccess(routeDeps));
  const server = state.config.settings.server;
  const limiter = new RateLimiter(server.clientRateLimit, server.clientRateBurst);
  const timeoutMs = server.requestTimeout * 1000;
  const gate = new AdminGate(ADMIN_YIELD_FACTOR);

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const started = process.hrtime.bigint();
    const requestId = requestIdOf(request);
    // Read now: a socket that has died no longer knows its peer.
    const remote = request.socket.remoteAddress;
    let routePath = 'unmatched';
    // Absent until known: public routes have none, admin routes only once the token checked out.
    let actor: string | undefined;
    let scopes: readonly Scope[] = [];
    let stream: Readable | undefined;
    response.setHeader('X-Request-Id', requestId);
    inFlight += 1;
    // In flight until the handler is done and the answer is out or can no longer go out.
    let handling = true;
    let outcome: 'finished' | 'aborted' | undefined;
    const release = () => {
      if (!handling && outcome) inFlight -= 1;
    };
    const settle = (result: 'finished' | 'aborted') => {
      if (outcome) return;
      outcome = result;
      response.off('finish', onFinish).off('close', onGone);
      untrack(request.socket, onGone);
      if (result === 'aborted') stream?.destroy();
      const status = result === 'finished' ? response.statusCode : null;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.request(routePath, status, seconds);
      deps.log({
        time: new Date().toISOString(),
        level: status !== null && status >= 500 ? 'error' : 'info',
        msg: 'request',
        request_id: requestId,
        method: request.method,
        route: routePath,
        status,
        duration_ms: Math.round(seconds * 1e6) / 1000,
        remote,
        ...(actor === undefined ? {} : { actor }),
        ...(result === 'aborted' ? { aborted: true } : {}),
      });
      release();
    };
    const onFinish = () => settle('finished');
    const onGone = () => settle(response.writableFinished ? 'finished' : 'aborted');
    response.once('finish', onFinish).once('close', onGone);
    // A response queued behind a pipelined one gets neither 'finish' nor 'close' when the
    // connection dies under it; only the socket says so.
    track(request.socket, onGone);

    void (async () => {
      let route: Route | undefined;
      let clientDone: (() => void) | undefined;
      try {
        // Before any await: Node dispatches some of these and only then fails on the body,
        // so the answer must already be out when its parser error arrives (server.ts).
        refuseUnusualTransferEncoding(request);
        const [path = '', search = ''] = (request.url ?? '').split('?', 2);
        const match = router.match(request.method ?? 'GET', path);
        route = match.route;
        routePath = `${route.method} ${route.path}`;
        if (!accepting) throw new LicenseServerError('SHUTTING_DOWN', 'the server is shutting down');
        if (paused !== undefined && route.path !== '/healthz') {
          response.setHeader('Retry-After', String(paused));
          throw new LicenseServerError('RESTORE_IN_PROGRESS', 'a backup is being restored; try again shortly');
        }
        if (state.refusal && route.path !== '/healthz') throw state.refusal;
        const peer = remote ?? 'unknown';
        if (route.access === 'client') {
          clientDone = gate.client();
          actor = `client:${peer}`;
          const wait = limiter.take(peer);
          if (wait > 0) {
            response.setHeader('Retry-After', String(wait));
            throw new LicenseServerError('RATE_LIMITED', `too many requests from this address; retry in ${wait} s`);
          }
        } else if (route.access === 'admin') {
          const admin = await authenticate(request, deps);
          actor = admin.actor;
          scopes = admin.scopes;
          const needed = route.scope ?? 'admin';
          if (needed !== 'any' && !scopeAllows(admin.scopes, needed)) {
            throw new LicenseServerError('TOKEN_SCOPE', `this route needs a token with the scope "${needed}"; this one has ${admin.scopes.map((scope) => `"${scope}"`).join(', ')}`);
          }
        }
        const raw = route.rawBody ? await readRawBody(request, timeoutMs, route.rawBody) : NO_BYTES;
        const body = route.method !== 'GET' && !route.rawBody ? await readJsonObject(request, timeoutMs) : {};
        const context = {
          params: match.params,
          query: new URLSearchParams(search),
          body,
          actor: actor ?? `client:${peer}`,
          scopes,
          accept: String(request.headers.accept ?? ''),
          ifNoneMatch: String(request.headers['if-none-match'] ?? ''),
          raw,
          turn: <T>(work: () => Promise<T>) => gate.admin(work),
        };
        const handler = route;
        const reply = route.access === 'admin' && route.method === 'GET' ? await gate.admin(async () => jsonInSlices(await handler.handle(context))) : await route.handle(context);
        if ('stream' in reply) stream = reply.stream;
        if (!accepting) response.setHeader('Connection', 'close');
        send(request, response, reply);
      } catch (error) {
        const { status, body } = toErrorResponse(error, requestId);
        if (body.error.code === 'DATABASE_REPLACED' && !replacedLogged) {
          replacedLogged = true;
          deps.log({ time: new Date().toISOString(), level: 'error', msg: 'the database file was replaced under the daemon; it serves nothing more until it is restarted', error: (error as Error).message });
        }
        if (status === 500) deps.log({ time: new Date().toISOString(), level: 'error', msg: 'unhandled error', request_id: requestId, error: describeBug(error) });
        if (!response.headersSent && !response.destroyed) {
          const allow = (error as { allow?: string }).allow;
          if (allow) response.setHeader('Allow', allow);
          if (status === 401) response.setHeader('WWW-Authenticate', 'Bearer');
          // A body we stopped reading (too large, too slow, wrong type) leaves the connection unusable.
          if (!request.complete || !accepting) response.setHeader('Connection', 'close');
        }
        send(request, response, { status, json: body });
      } finally {
        clientDone?.();
      }
    })().finally(() => {
      handling = false;
      // The answer may never get out (the connection died first): its stream must not stay open.
      if (outcome === 'aborted') stream?.destroy();
      release();
    });
  };

  return {
    handle,
    inFlight: () => inFlight,
    stopAccepting: () => {
      accepting = false;
    },
    close: () => {
      limiter.close();
      metrics.close();
    },
    log: deps.log,
    metrics,
  };
}

/**
 * Every route, its handler given the database its kind of request should use: admin GET
 * routes the admin reads, other admin routes the admin writes, the rest (the clients'
 * routes above all) the daemon's database. An admin request then cannot stall a client's
 * (storage/admin-databases.ts). The route builders are pure, so each is built once per
 * kind and the right one picked.
 */
function routesByAccess(deps: RouteDependencies): Route[] {
  const withDb = (db: () => Database): RouteDependencies => Object.create(deps, { db: { get: db } }) as RouteDependencies;
  const plain = allRoutes(deps);
  const adminReads = allRoutes(withDb(() => deps.state.adminReads));
  const adminWrites = allRoutes(withDb(() => deps.state.adminWrites));
  return plain.map((route, i) => (route.access !== 'admin' ? route : route.method === 'GET' ? adminReads[i]! : adminWrites[i]!));
}

const NO_BYTES = Buffer.alloc(0);

/** Admin reads yield this many times their own duration to waiting clients (admin-gate.ts). */
const ADMIN_YIELD_FACTOR = 4;

export function allRoutes(deps: RouteDependencies): Route[] {
  const routes: Route[] = [...whoamiRoutes(() => routes), ...healthRoutes(deps), ...adminPageRoutes(), ...importRoutes(deps), ...adminRoutes(deps), ...signingKeyRoutes(deps), ...lifecycleRoutes(deps), ...backupRoutes(deps), ...notificationRoutes(deps), ...tokenRoutes(deps), ...clientRoutes(deps), ...metricsRoutes(deps), ...openApiRoutes(), ...attentionRoutes(deps), ...listCountRoutes(deps), ...searchRoutes(deps), ...bulkRoutes(deps)];
  return routes;
}

async function authenticate(request: IncomingMessage, deps: AppDependencies): Promise<AuthenticatedAdmin> {
  const header = request.headers.authorization;
  const match = typeof header === 'string' ? /^Bearer ([\x21-\x7e]{1,512})$/i.exec(header) : null;
  if (!match) throw new LicenseServerError('UNAUTHORIZED', 'an admin bearer token is required');
  const admin = await authenticateAdminToken(deps.state.db, match[1]!, { bootstrapToken: deps.state.config.settings.adminToken, clock: deps.clock });
  if (!admin) throw new LicenseServerError('UNAUTHORIZED', 'the bearer token is not valid');
  return admin;
}

function send(request: IncomingMessage, response: ServerResponse, reply: Reply): void {
  if (response.headersSent || response.destroyed) {
    if ('stream' in reply) reply.stream.destroy();
    return;
  }
  response.setHeader('Cache-Control', 'no-store');
  response.setHeader('X-Content-Type-Options', 'nosniff');
  if ('stream' in reply) {
    response.statusCode = reply.status ?? 200;
    response.setHeader('Content-Type', reply.contentType);
    if (reply.size !== undefined) response.setHeader('Content-Length', reply.size);
    for (const [name, value] of Object.entries(reply.headers ?? {})) response.setHeader(name, value);
    if (request.method === 'HEAD') {
      reply.stream.destroy();
      response.end();
      return;
    }
    // Piped, so a large backup goes out in constant memory at the client's pace; a failure
    // on either side closes both.
    pipeline(reply.stream, response, () => undefined);
    return;
  }
  let payload: Buffer;
  if ('json' in reply) {
    payload = Buffer.from(JSON.stringify(reply.json), 'utf8');
    response.setHeader('Content-Type', 'application/json; charset=utf-8');
  } else {
    payload = Buffer.isBuffer(reply.raw) ? reply.raw : Buffer.from(reply.raw, 'utf8');
    response.setHeader('Content-Type', reply.contentType);
  }
  for (const [name, value] of Object.entries(reply.headers ?? {})) response.setHeader(name, value);
  response.statusCode = reply.status ?? 200;
  // 304 has no body, and a Content-Length there would have to be the 200's (RFC 9110 section 8.6).
  if (response.statusCode === 304) {
    response.removeHeader('Content-Type');
    response.end();
    return;
  }
  response.setHeader('Content-Length', payload.length);
  response.end(request.method === 'HEAD' ? undefined : payload);
}

/** Per connection, the requests on it whose answers are not out yet. */
const unsettled = new WeakMap<Socket, Set<() => void>>();

function track(socket: Socket, onGone: () => void): void {
  let callbacks = unsettled.get(socket);
  if (!callbacks) {
    const set = new Set<() => void>();
    unsettled.set(socket, set);
    socket.once('close', () => {
      for (const callback of [...set]) callback();
      set.clear();
    });
    callbacks = set;
  }
  callbacks.add(onGone);
  if (socket.closed) queueMicrotask(onGone);
}

function untrack(socket: Socket, onGone: () => void): void {
  unsettled.get(socket)?.delete(onGone);
}

/**
 * Bodies come with Content-Length or `Transfer-Encoding: chunked`, nothing else: a coding
 * we do not decode (gzip, identity, a list) would be read as the wrong bytes.
 */
function refuseUnusualTransferEncoding(request: IncomingMessage): void {
  const given = request.headers['transfer-encoding'];
  if (given === undefined || given.trim().toLowerCase() === 'chunked') return;
  throw new LicenseServerError('INVALID_INPUT', `Transfer-Encoding ${describe(given)} is not supported; send Content-Length or Transfer-Encoding: chunked`);
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** The caller's X-Request-Id when it is harmless to log, else a fresh one. */
export function requestIdOf(request: Pick<IncomingMessage, 'headers'>): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** For the log only: the error's class and first line, which carry no request data of ours. */
function describeBug(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${(error.message.split('\n')[0] ?? '').slice(0, 200)}`;
  return typeof error;
}
