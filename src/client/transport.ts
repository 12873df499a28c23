/**
 * The two calls the client makes, classified the way the fallback chain needs them:
 * an answer the server gave on purpose, or "unreachable" (no connection, a timeout, a 5xx,
 * a 429, or a body that is not the API's JSON). Only "unreachable" moves the chain down.
 */
export type ServerReply =
  | { readonly kind: 'answer'; readonly status: number; readonly body: Record<string, unknown> }
  | { readonly kind: 'unreachable'; readonly reason: string };

export async function postJson(url: string, body: unknown, timeoutMs: number): Promise<ServerReply> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    const name = (error as Error).name;
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { kind: 'unreachable', reason: name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : `cannot reach the server (${cause ?? name})` };
  }
  let text: string;
  try {
    text = await response.text();
  } catch {
    return { kind: 'unreachable', reason: 'the answer was cut off' };
  }
  if (response.status >= 500) return { kind: 'unreachable', reason: `the server failed (HTTP ${response.status})` };
  if (response.status === 429) return { kind: 'unreachable', reason: 'the server is rate-limiting this machine (HTTP 429)' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { kind: 'unreachable', reason: `the server answered something that is not JSON (HTTP ${response.status})` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { kind: 'unreachable', reason: `the server answered JSON that is not an object (HTTP ${response.status})` };
  }
  return { kind: 'answer', status: response.status, body: parsed as Record<string, unknown> };
}
