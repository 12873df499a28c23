import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

/**
 * The two calls the client makes, classified the way the fallback chain needs them:
 * an answer the server gave on purpose, or "unreachable" (no connection, a timeout, a 5xx,
 * a 429, or a body that is not the API's JSON). Only "unreachable" moves the chain down.
 */
export type ServerReply =
  | { readonly kind: 'answer'; readonly status: number; readonly body: Record<string, unknown> }
  | { readonly kind: 'unreachable'; readonly reason: string; readonly timedOut?: true };

export interface Deadlines {
  /** Until the connection (TCP, and TLS for HTTPS) is up: a black-holed server costs this much. */
  readonly connectTimeout: number;
  /** Until the whole answer has arrived. */
  readonly requestTimeout: number;
}

/** No answer of the API comes near this; a bigger body is not our server talking. */
export const MAX_ANSWER_BYTES = 1024 * 1024;

/**
 * node:http rather than fetch: fetch gives no separate connect deadline (a black-holed
 * address would cost the whole request timeout on every call) and reads any body in full
 * before it can be refused for its size.
 */
export function postJson(url: string, body: unknown, deadlines: Deadlines): Promise<ServerReply> {
  return requestJson('POST', url, Buffer.from(JSON.stringify(body)), deadlines);
}

/** A GET of a JSON answer (the public key set), classified as postJson's answers are. */
export function getJson(url: string, deadlines: Deadlines): Promise<ServerReply> {
  return requestJson('GET', url, undefined, deadlines);
}

function requestJson(method: 'GET' | 'POST', url: string, payload: Buffer | undefined, deadlines: Deadlines): Promise<ServerReply> {
  return new Promise((resolve) => {
    const target = new URL(url);
    const request = (target.protocol === 'https:' ? https : http).request(target, {
      method,
      headers: payload ? { 'content-type': 'application/json', accept: 'application/json', 'content-length': payload.length } : { accept: 'application/json' },
    });
    let settled = false;
    const finish = (reply: ServerReply) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(requestTimer);
      resolve(reply);
    };
    const unreachable = (reason: string, timedOut = false) => {
      finish(timedOut ? { kind: 'unreachable', reason, timedOut } : { kind: 'unreachable', reason });
      request.destroy();
    };
    const connectTimer = setTimeout(() => unreachable(`no connection within ${deadlines.connectTimeout} ms`, true), Math.min(deadlines.connectTimeout, deadlines.requestTimeout));
    const requestTimer = setTimeout(() => unreachable(`no answer within ${deadlines.requestTimeout} ms`, true), deadlines.requestTimeout);
    request.on('socket', (socket: Socket) => {
      // A kept-alive socket is connected already; a new one is when TCP (and TLS) are up.
      if (target.protocol === 'https:') {
        const protocol = (socket as TLSSocket).getProtocol();
        if (protocol === null || protocol === 'unknown') socket.once('secureConnect', () => clearTimeout(connectTimer));
        else clearTimeout(connectTimer);
      } else if (socket.connecting) {
        socket.once('connect', () => clearTimeout(connectTimer));
      } else {
        clearTimeout(connectTimer);
      }
    });
    request.on('error', (error: NodeJS.ErrnoException) => unreachable(`cannot reach the server (${error.code ?? error.name})`));
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      const declared = Number(response.headers['content-length']);
      if (declared > MAX_ANSWER_BYTES) return unreachable(`the answer is larger than 1 MiB (HTTP ${status})`);
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) return unreachable(`the answer is larger than 1 MiB (HTTP ${status})`);
        chunks.push(chunk);
      });
      response.on('close', () => {
        if (!response.complete) unreachable('the answer was cut off');
      });
      response.on('end', () => finish(classify(status, Buffer.concat(chunks).toString('utf8'))));
    });
    request.end(payload);
  });
}

function classify(status: number, text: string): ServerReply {
  if (status >= 500) return { kind: 'unreachable', reason: `the server failed (HTTP ${status})` };
  if (status === 429) return { kind: 'unreachable', reason: 'the server is rate-limiting this machine (HTTP 429)' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { kind: 'unreachable', reason: `the server answered something that is not JSON (HTTP ${status})` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { kind: 'unreachable', reason: `the server answered JSON that is not an object (HTTP ${status})` };
  }
  return { kind: 'answer', status, body: parsed as Record<string, unknown> };
}
