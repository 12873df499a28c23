import { createHash } from 'node:crypto';
import type { Reply } from './router.js';

/**
 * A JSON answer that caches may keep for `maxAge` seconds, with a strong ETag of its bytes
 * (RFC 9110 section 8.8.3): a request whose If-None-Match names it gets 304 and no body.
 * For public data only: `public` lets shared caches keep it.
 */
export function cacheableJson(json: unknown, ifNoneMatch: string, maxAge: number): Reply {
  const body = Buffer.from(JSON.stringify(json), 'utf8');
  const etag = `"${createHash('sha256').update(body).digest('base64url')}"`;
  const headers = { ETag: etag, 'Cache-Control': `public, max-age=${maxAge}` };
  if (matches(ifNoneMatch, etag)) return { status: 304, raw: '', contentType: 'application/json; charset=utf-8', headers };
  return { raw: body, contentType: 'application/json; charset=utf-8', headers };
}

/** If-None-Match uses the weak comparison (RFC 9110 section 13.1.2): a W/ prefix does not matter. */
function matches(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}
