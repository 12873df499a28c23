import type { Readable } from 'node:stream';
import type { Scope } from '../lib/admin-tokens.js';
import { LicenseServerError, type ErrorCode } from '../lib/errors.js';

export interface RequestContext {
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  /** The parsed JSON body of a POST ({} when it has none); {} for GET. */
  readonly body: Record<string, unknown>;
  /** `token:<name>` for admin routes, `client:<address>` for client routes. */
  readonly actor: string;
  /** The scopes of the admin token on admin routes; empty elsewhere. */
  readonly scopes: readonly Scope[];
  readonly accept: string;
  /** The If-None-Match header as sent ('' without one), for routes that answer 304. */
  readonly ifNoneMatch: string;
  /** The body as sent, on a route that takes `rawBody`; empty elsewhere. */
  readonly raw: Buffer;
  /**
   * Runs `work` in the admin reads' turn (admin-gate.ts): for an admin GET whose reply goes on
   * reading after its handler returned (a CSV export, page by page). Absent: runs it at once.
   */
  readonly turn?: <T>(work: () => Promise<T>) => Promise<T>;
}

export type Reply =
  | { readonly status?: number; readonly json: unknown; readonly headers?: Record<string, string> }
  /** A stream; without a `size` it goes out chunked, for a body whose length is known only at its end. */
  | { readonly status?: number; readonly stream: Readable; readonly size?: number; readonly contentType: string; readonly headers?: Record<string, string> }
  | { readonly status?: number; readonly raw: string | Buffer; readonly contentType: string; readonly headers?: Record<string, string> };

export type Access = 'admin' | 'client' | 'public';
/** An admin route's scope; `any` takes any valid token (GET /api/whoami). */
export type RouteScope = Scope | 'any';

export interface Route {
  readonly method: 'GET' | 'POST' | 'PATCH';
  /** Segments; `:name` captures one. */
  readonly path: string;
  readonly access: Access;
  /** Admin routes: the scope a token needs (see Scope); a route without one needs `admin`. */
  readonly scope?: RouteScope;
  /** A body of this media type (not JSON), handed over as bytes in `raw`; at most `maxBytes`, or `tooLarge` (413). */
  readonly rawBody?: { readonly type: string; readonly maxBytes: number; readonly tooLarge: ErrorCode };
  handle(context: RequestContext): Promise<Reply>;
}

export interface Match {
  readonly route: Route;
  readonly params: Record<string, string>;
}

/**
 * A plain route table: a handful of fixed paths does not need a router library. Paths are
 * matched segment by segment on the raw request path, percent-decoded per segment and never
 * normalised: a `.` or `..` segment, wherever it is and however encoded, is refused as an
 * id (INVALID_ID) before any route is tried, so `/api/licenses/../signing-key` is neither a
 * way around a route nor a 404 that hides what was wrong.
 */
export class Router {
  private readonly compiled: Array<{ route: Route; segments: string[]; literals: number }>;

  constructor(routes: readonly Route[]) {
    // Most literal segments first (a stable sort keeps the table's order among equals), so
    // that the first pattern that fits is one of the best and matching stops soon after it.
    this.compiled = routes
      .map((route) => {
        const segments = route.path.split('/').slice(1);
        return { route, segments, literals: segments.filter((part) => !part.startsWith(':')).length };
      })
      .sort((a, b) => b.literals - a.literals);
  }

  match(method: string, path: string): Match {
    const segments = splitPath(path);
    const allowed = new Set<string>();
    const effective = method === 'HEAD' ? 'GET' : method;
    // A literal segment wins over a parameter (`/api/licenses/count` over `/api/licenses/:id`),
    // whatever order the routes were listed in: only the patterns with the most literal
    // segments that fit the path are tried.
    let best: number | undefined;
    for (const { route, segments: pattern, literals } of this.compiled) {
      if (best !== undefined && literals < best) break;
      if (pattern.length !== segments.length) continue;
      const params: Record<string, string> = {};
      const fits = pattern.every((part, i) => {
        if (part.startsWith(':')) {
          params[part.slice(1)] = segments[i]!;
          return true;
        }
        return part === segments[i];
      });
      if (!fits) continue;
      best = literals;
      if (route.method === effective) return { route, params };
      allowed.add(route.method);
    }
    if (allowed.size > 0) {
      const error = new LicenseServerError('METHOD_NOT_ALLOWED', `${method} is not allowed here; use ${[...allowed].join(' or ')}`);
      (error as LicenseServerError & { allow?: string }).allow = [...allowed, ...(allowed.has('GET') ? ['HEAD'] : [])].join(', ');
      throw error;
    }
    throw new LicenseServerError('ROUTE_NOT_FOUND', 'no such route');
  }
}

function splitPath(path: string): string[] {
  if (!path.startsWith('/')) throw new LicenseServerError('ROUTE_NOT_FOUND', 'no such route');
  const segments = path.split('/').slice(1).map((segment) => {
    try {
      return decodeURIComponent(segment);
    } catch {
      throw new LicenseServerError('INVALID_INPUT', 'the path is not valid percent-encoding');
    }
  });
  if (segments.some((segment) => segment === '.' || segment === '..')) {
    throw new LicenseServerError('INVALID_ID', 'a path segment is "." or "..", which is not an id; paths are matched as sent, never normalised');
  }
  return segments;
}
