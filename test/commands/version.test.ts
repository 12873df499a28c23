import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ok, runCli } from '../support/cli.js';

/** bin/run.js answers `--version` itself, before oclif loads: it must say what oclif would. */
describe('license-server --version', () => {
  it('prints exactly what oclif prints for a version (its user agent), with nothing on standard error', async () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const expected = execFileSync(process.execPath, ['--input-type=module', '-e', `
      const { Config } = await import('@oclif/core');
      const config = await Config.load(${JSON.stringify(root)});
      console.log(config.userAgent);`], { cwd: root, encoding: 'utf8' });
    const result = ok(await runCli(['--version']));
    assert.equal(result.stdout, expected);
    assert.match(result.stdout, /^license-server\/\d+\.\d+\.\d+ \S+-\S+ node-v\d+/);
    assert.equal(result.stderr, '');
  });
});
