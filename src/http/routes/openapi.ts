import { readFileSync } from 'node:fs';
import type { Route } from '../router.js';

/** docs/openapi.json at the package root ("files" ships docs/), the same from src/ and dist/. */
const DOCUMENT = new URL('../../../docs/openapi.json', import.meta.url);
let document: Buffer | undefined;

/** The OpenAPI document, read once on its first request and served as it is. */
export function openApiRoutes(): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/openapi.json',
      access: 'public',
      handle: async () => ({ raw: (document ??= readFileSync(DOCUMENT)), contentType: 'application/json; charset=utf-8' }),
    },
  ];
}
