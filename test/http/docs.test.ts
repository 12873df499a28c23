import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { allRoutes } from '../../src/http/app.js';
import type { RouteDependencies } from '../../src/http/route-dependencies.js';
import { ERROR_TABLE } from '../../src/lib/errors.js';

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

  it('lists every error code in the status table of "Errors", on the row of the status the error table gives it', () => {
    const errors = /^## Errors\n([\s\S]*?)^## /m.exec(doc)![1]!;
    const rows = new Map<number, string>();
    for (const [, status, codes] of errors.matchAll(/^\| (\d{3}) \| (.*) \|$/gm)) rows.set(Number(status), codes!);
    const misplaced: string[] = [];
    for (const [code, { http }] of Object.entries(ERROR_TABLE)) {
      const listed = [...rows].filter(([, codes]) => codes.includes(`\`${code}\``)).map(([status]) => status);
      if (listed.length !== 1 || listed[0] !== http) misplaced.push(`${code}: status ${http}, listed under ${listed.join(', ') || 'none'}`);
    }
    assert.deepEqual(misplaced, []);
    const known = new Set(Object.keys(ERROR_TABLE));
    const unknown = [...rows.values()].flatMap((codes) => [...codes.matchAll(/`([A-Z][A-Z_]+)`/g)].map((m) => m[1]!)).filter((code) => !known.has(code));
    assert.deepEqual(unknown, [], 'no code is listed that the error table does not have');
  });
});
