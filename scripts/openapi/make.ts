/**
 * Writes docs/openapi.json from scripts/openapi/document.ts: `npx tsx scripts/openapi/make.ts`.
 * test/http/openapi-routes.test.ts fails when the committed file differs from what this makes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { openApiDocument } from './document.js';

export const DOCUMENT_URL = new URL('../../docs/openapi.json', import.meta.url);

export function renderDocument(): string {
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return `${JSON.stringify(openApiDocument(version), null, 2)}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) writeFileSync(DOCUMENT_URL, renderDocument());
