import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

/**
 * The Python that runs the readers: LICENSE_TEST_PYTHON when set (.ci/run pins Debian's
 * /usr/bin/python3 with Debian's python3-cryptography, so every Node line's run reads with the
 * same library), else the first python3 on PATH.
 */
export const PYTHON = process.env.LICENSE_TEST_PYTHON || 'python3';

/**
 * The independent readers (test/clients/*.py) need python3 with the cryptography package:
 * a test skips without it, except under CI=true, where a missing peer is a failure.
 */
export function requirePythonCryptography(context: Mocha.Context): void {
  if (spawnSync(PYTHON, ['-c', 'import cryptography.hazmat.primitives.ciphers.aead']).status === 0) return;
  if (process.env.CI === 'true') throw new Error(`${PYTHON} with the cryptography package is required`);
  context.skip();
}

/** Runs a reader that prints one JSON object and exits 0 (it passed) or 1 (it refused). */
export function runPythonJson<T>(args: readonly string[]): { status: number | null } & T {
  const run = spawnSync(PYTHON, args, { encoding: 'utf8' });
  assert.ok(run.status === 0 || run.status === 1, `${PYTHON} exited ${run.status}: ${run.stderr}`);
  return { status: run.status, ...JSON.parse(run.stdout) };
}
