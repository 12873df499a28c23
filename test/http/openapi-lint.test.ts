import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('docs/openapi.json passes Redocly\'s linter (redocly.yaml)', () => {
  it('has no errors and no warnings', async function () {
    this.timeout(120_000);
    // No network: no telemetry, no update check.
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
    const result = await promisify(execFile)(fileURLToPath(new URL('node_modules/.bin/redocly', `file://${root}`)), ['lint', 'docs/openapi.json', '--format=stylish', '--max-problems=50'], { cwd: root, env })
      .then(({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }))
      .catch((error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, output: error.stdout + error.stderr }));
    assert.equal(result.code, 0, `exit ${String(result.code)}\n${result.output}`);
    // Problems are `line:col  warning|error  rule  message` lines; Redocly's own banners are not.
    assert.doesNotMatch(result.output, /^\s*\d+:\d+\s+(?:warning|error)\s/m, result.output);
  });
});
