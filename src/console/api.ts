import { forgetToken, storedToken } from './session.js';

/** An answer the server refused, with its stable code (docs/errors.md). */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

type Listener = (message: string) => void;
const unauthorizedListeners = new Set<Listener>();

/** Called when the server stops accepting the token (revoked, expired): the page signs out. */
export function onUnauthorized(listener: Listener): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export interface CallOptions {
  readonly body?: unknown;
  /** A raw body (an uploaded file), sent as it is with this content type. */
  readonly raw?: { readonly bytes: BodyInit; readonly type: string };
  readonly accept?: string;
  readonly signal?: AbortSignal;
}

export async function call(method: string, path: string, options: CallOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${storedToken() ?? ''}` };
  let body: BodyInit | undefined;
  if (options.raw) {
    headers['content-type'] = options.raw.type;
    body = options.raw.bytes;
  } else if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.body);
  } else if (method !== 'GET') {
    // Every admin POST takes a JSON object; an action with nothing to say sends an empty one.
    headers['content-type'] = 'application/json';
    body = '{}';
  }
  if (options.accept) headers.accept = options.accept;
  const response = await fetch(path, { method, headers, body, signal: options.signal });
  if (response.status === 401) {
    forgetToken();
    for (const listener of unauthorizedListeners) listener('The token was not accepted.');
    throw new ApiError(401, 'UNAUTHORIZED', 'The token was not accepted.');
  }
  if (!response.ok) {
    const problem = (await response.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    const code = problem.error?.code ?? `HTTP_${response.status}`;
    throw new ApiError(response.status, code, problem.error?.message ? `${problem.error.message} (${code})` : `The server answered HTTP ${response.status}.`);
  }
  return response;
}

export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  return (await call('GET', path, { signal })).json() as Promise<T>;
}

export async function send<T>(method: string, path: string, body?: unknown): Promise<T> {
  return (await call(method, path, { body })).json() as Promise<T>;
}

/** One page of a list and the server's URL of the next one (its `Link: <...>; rel="next"`). */
export interface ListAnswer<T> {
  readonly items: T[];
  readonly next: string | null;
}

export async function getList<T>(path: string, signal?: AbortSignal): Promise<ListAnswer<T>> {
  const response = await call('GET', path, { signal });
  const link = response.headers.get('link');
  const next = link ? /<([^>]+)>\s*;\s*rel="next"/.exec(link)?.[1] ?? null : null;
  return { items: (await response.json()) as T[], next };
}

/** Saves a response body as a file, named by its Content-Disposition. */
export async function save(response: Response, fallback: string): Promise<string> {
  const disposition = response.headers.get('content-disposition') ?? '';
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? fallback;
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return name;
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
