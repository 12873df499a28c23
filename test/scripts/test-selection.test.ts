import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: a plain ESM script without types
import { selected, shardOf } from '../../scripts/test.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** scripts/test.mjs, which `npm test` runs: the shards and the Node-line set .ci/run relies on. */
describe('npm test (scripts/test.mjs)', () => {
  const withEnv = <T>(env: Record<string, string | undefined>, run: () => T): T => {
    const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
    Object.assign(process.env, env);
    for (const [name, value] of Object.entries(env)) if (value === undefined) delete process.env[name];
    try {
      return run();
    } finally {
      for (const [name, value] of Object.entries(saved)) if (value === undefined) delete process.env[name]; else process.env[name] = value;
    }
  };

  it('splits the whole suite into shards that hold every file exactly once', () => {
    const all: string[] = withEnv({ LICENSE_TEST_SHARD: undefined, LICENSE_TEST_SET: undefined }, () => selected());
    assert.ok(all.length > 150 && all.includes('test/scripts/test-selection.test.ts'), `${all.length} files`);
    for (const count of [1, 2, 3]) {
      const shards: string[][] = Array.from({ length: count }, (_, i) => withEnv({ LICENSE_TEST_SHARD: `${i + 1}/${count}`, LICENSE_TEST_SET: undefined }, () => selected()));
      assert.deepEqual(shards.flat().sort(), all, `${count} shards`);
      for (const shard of shards) assert.ok(shard.length > 0);
    }
  });

  it('balances shards by the seconds each file took, longest first to the lightest shard', () => {
    const seconds = { a: 10, b: 1, c: 5, d: 5 }; // e is missing: it counts as the median, 5
    assert.deepEqual([shardOf(['a', 'b', 'c', 'd', 'e'], 0, 2, seconds), shardOf(['a', 'b', 'c', 'd', 'e'], 1, 2, seconds)], [['a', 'e'], ['b', 'c', 'd']]);
  });

  it('runs on the other Node lines the native driver, the core, the client package and the CLI, and not the SIGKILL loops', () => {
    const set: string[] = withEnv({ LICENSE_TEST_SET: 'node-line', LICENSE_TEST_SHARD: undefined }, () => selected());
    for (const file of ['test/lib/storage/contract.test.ts', 'test/client/license-client.test.ts', 'test/commands/version.test.ts', 'test/scripts/native-driver.test.ts']) assert.ok(set.includes(file), file);
    for (const file of ['test/commands/backup-debris.test.ts', 'test/commands/cross-engine-faults.test.ts', 'test/http/admin-page.test.ts', 'test/commands/offline.test.ts', 'test/lib/backup/targets/s3.test.ts']) assert.ok(!set.includes(file), file);
  });

  it('refuses a shard it cannot make, before running anything', () => {
    const run = spawnSync(process.execPath, ['scripts/test.mjs'], { cwd: root, env: { ...process.env, LICENSE_TEST_SHARD: '3/2' }, encoding: 'utf8' });
    assert.equal(run.status, 2);
    assert.match(run.stderr, /LICENSE_TEST_SHARD=3\/2: write K\/N/);
  });
});
