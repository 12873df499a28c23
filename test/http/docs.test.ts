import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { allRoutes, type RouteDependencies } from '../../src/http/app.js';

describe('docs/http-api.md', () => {
  const doc = readFileSync(new URL('../../docs/http-api.md', import.meta.url), 'utf8');
  const all = allRoutes({} as RouteDependencies);
  const name = (route: (typeof all)[number]) => `${route.method} ${route.path.replace(/:(\w+)/g, '{$1}')}`;
  const routes = all.map(name);

  it('has a section for every route of the daemon, and none for a route it does not have', () => {
    const documented = new Set<string>();
    for (const [, heading] of doc.matchAll(/^### (.+)$/gm)) {
      for (const [, route] of heading!.matchAll(/`((?:GET|POST|PATCH) [^`]+)`/g)) documented.add(route!);
    }
    assert.deepEqual([...documented].sort(), [...routes].sort());
  });

  it('names for every admin route the scope the code asks of a token', () => {
    for (const route of all.filter((candidate) => candidate.access === 'admin')) {
      const heading = new RegExp(`^### .*\`${name(route).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\`.*\n(.*)$`, 'm').exec(doc);
      assert.ok(heading, `no section for ${name(route)}`);
      const expected = route.scope === 'any' ? 'any' : `\`${route.scope ?? 'admin'}\``;
      assert.ok(heading[1]!.startsWith(`Scope: ${expected}.`), `${name(route)}: the doc says "${heading[1]}", the code needs ${expected}`);
    }
  });
});
