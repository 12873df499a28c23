import { Readable } from 'node:stream';
import type { Reply } from './router.js';

/** Items serialised between two turns of the event loop. */
const SLICE = 250;

/**
 * A large JSON array reply (a page of 1,000 licenses, the most the HTTP API answers, is about
 * 700 KB), serialised a slice at a time with the event loop free in between, and sent as a
 * stream at the client's pace: in one piece, JSON.stringify and the write held the daemon's
 * main thread while client requests waited (with 10,000-license pages, before the limit came
 * down, for tens of milliseconds each, doubling PostgreSQL's validation p99 beside them). The
 * bytes are the same as JSON.stringify's. Other replies are returned as they are.
 */
export async function jsonInSlices(reply: Reply): Promise<Reply> {
  if (!('json' in reply) || !Array.isArray(reply.json) || reply.json.length <= SLICE) return reply;
  const items: unknown[] = reply.json;
  const parts: Buffer[] = [];
  let size = 0;
  for (let i = 0; i < items.length; i += SLICE) {
    if (i > 0) await new Promise((resolve) => setImmediate(resolve));
    const text = items.slice(i, i + SLICE).map((item) => JSON.stringify(item) ?? 'null').join(',');
    const part = Buffer.from(`${i === 0 ? '[' : ','}${text}${i + SLICE >= items.length ? ']' : ''}`, 'utf8');
    parts.push(part);
    size += part.length;
  }
  const headers = (reply as { headers?: Record<string, string> }).headers;
  return { status: reply.status, stream: Readable.from(parts, { objectMode: false }), size, contentType: 'application/json; charset=utf-8', ...(headers ? { headers } : {}) };
}
