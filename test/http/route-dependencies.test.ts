import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

describe('route modules', () => {
  it('take RouteDependencies from route-dependencies.ts, never import app.ts (which imports them)', () => {
    const dir = path.resolve('src/http/routes');
    const offenders = readdirSync(dir)
      .filter((name) => name.endsWith('.ts'))
      .filter((name) => /from '\.\.\/app\.js'/.test(readFileSync(path.join(dir, name), 'utf8')));
    assert.deepEqual(offenders, []);
  });
});
