import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { allRoutes, type RouteDependencies } from '../../src/http/app.js';

describe('docs/http-api.md', () => {
  const doc = readFileSync(new URL('../../docs/http-api.md', import.meta.url), 'utf8');
  const routes = allRoutes({} as RouteDependencies).map((route) => `${route.method} ${route.path.replace(/:(\w+)/g, '{$1}')}`);

  it('has a section for every route of the daemon, and none for a route it does not have', () => {
    const documented = new Set<string>();
    for (const [, heading] of doc.matchAll(/^### (.+)$/gm)) {
      for (const [, route] of heading!.matchAll(/`((?:GET|POST) [^`]+)`/g)) documented.add(route!);
    }
    assert.deepEqual([...documented].sort(), [...routes].sort());
  });
});
