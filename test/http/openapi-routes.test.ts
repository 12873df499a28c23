import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { allRoutes } from '../../src/http/app.js';
import type { RouteDependencies } from '../../src/http/route-dependencies.js';
import { documentedRoutes } from '../../scripts/openapi/document.js';
import { DOCUMENT_URL, renderDocument } from '../../scripts/openapi/make.js';

describe('docs/openapi.json', () => {
  const committed = readFileSync(DOCUMENT_URL, 'utf8');
  const document = JSON.parse(committed) as Record<string, unknown>;

  it('is what scripts/openapi/make.ts makes (run `npx tsx scripts/openapi/make.ts` after changing scripts/openapi/)', () => {
    assert.ok(committed === renderDocument(), 'docs/openapi.json differs from what scripts/openapi/make.ts makes');
  });

  it('has an operation for every route of the router, and none that no route serves', () => {
    const routes = allRoutes({} as RouteDependencies).map((route) => `${route.method} ${route.path.replace(/:(\w+)/g, '{$1}')}`);
    const documented = documentedRoutes(document);
    const undocumented = routes.filter((route) => !documented.includes(route));
    const unserved = documented.filter((route) => !routes.includes(route));
    assert.deepEqual({ undocumented, unserved }, { undocumented: [], unserved: [] });
  });

  it('names for every admin route the scope the router asks, and marks the others public', () => {
    const paths = document.paths as Record<string, Record<string, { security: Array<Record<string, string[]>>; 'x-required-scope'?: string }>>;
    const wrong: string[] = [];
    for (const route of allRoutes({} as RouteDependencies)) {
      const operation = paths[route.path.replace(/:(\w+)/g, '{$1}')]![route.method.toLowerCase()]!;
      const expected = route.access === 'admin' ? (route.scope ?? 'admin') : undefined;
      const scopes = operation.security.flatMap((requirement) => requirement.bearerToken ?? []);
      const fits = expected === undefined
        ? operation.security.length === 0 && operation['x-required-scope'] === undefined
        : operation['x-required-scope'] === expected && (expected === 'any' ? scopes.length === 0 && operation.security.length === 1 : scopes.join() === expected);
      if (!fits) wrong.push(`${route.method} ${route.path}: ${JSON.stringify(operation.security)} ${operation['x-required-scope'] ?? ''}`);
    }
    assert.deepEqual(wrong, []);
  });
});
