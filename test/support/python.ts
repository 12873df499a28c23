import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

/**
 * The independent readers (test/clients/*.py) need python3 with the cryptography package:
 * a test skips without it, except under CI=true, where a missing peer is a failure.
 */
export function requirePythonCryptography(context: Mocha.Context): void {
  if (spawnSync('python3', ['-c', 'import cryptography.hazmat.primitives.ciphers.aead']).status === 0) return;
  if (process.env.CI === 'true') throw new Error('python3 with the cryptography package is required');
  context.skip();
}

/** Runs a reader that prints one JSON object and exits 0 (it passed) or 1 (it refused). */
export function runPythonJson<T>(args: readonly string[]): { status: number | null } & T {
  const run = spawnSync('python3', args, { encoding: 'utf8' });
  assert.ok(run.status === 0 || run.status === 1, `python3 exited ${run.status}: ${run.stderr}`);
  return { status: run.status, ...JSON.parse(run.stdout) };
}
