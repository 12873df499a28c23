import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PG_OVERLAP_MARKER } from './pg-overlap.js';

export const CLI = fileURLToPath(new URL('../../bin/run.js', import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed as JSON (for --json runs). */
  json<T = any>(): T;
}

/**
 * Runs the built CLI (bin/run.js over dist/) as a user would, with a clean environment:
 * no LICENSE_* variable leaks in from the developer's shell.
 */
export function runCli(args: readonly string[], options: { env?: Record<string, string>; cwd?: string; input?: string; prefix?: readonly string[] } = {}): Promise<CliResult> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith('LICENSE_')) env[name] = value;
  }
  Object.assign(env, options.env);
  const [command, ...commandArgs] = [...(options.prefix ?? []), process.execPath, CLI, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(command!, commandArgs, { cwd: options.cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (stderr.includes(PG_OVERLAP_MARKER)) {
        reject(new Error(`license-server ${args.join(' ')} sent a statement to a pg connection still running another (exit ${code}):\n${stderr}`));
        return;
      }
      resolve({
        code,
        stdout,
        stderr,
        json() {
          try {
            return JSON.parse(stdout);
          } catch {
            throw new Error(`stdout is not JSON (exit ${code}):\n${stdout}\nstderr:\n${stderr}`);
          }
        },
      });
    });
    child.stdin.end(options.input ?? '');
  });
}

/**
 * The prefix that runs a program as `user` with `env` set (sudo resets the environment):
 * runuser as root, `sudo -n` under CI=true (where .ci/run has sudo); undefined elsewhere,
 * where a test that needs it skips.
 */
export function asUser(user: string, env: Record<string, string>): string[] | undefined {
  const withEnv = ['env', ...Object.entries(env).map(([name, value]) => `${name}=${value}`)];
  if (process.getuid?.() === 0) return ['runuser', '-u', user, '--', ...withEnv];
  if (process.env.CI === 'true') return ['sudo', '-n', '-u', user, '--', ...withEnv];
  return undefined;
}

/** Asserts a run exited 0, showing its output when it did not; returns it for chaining. */
export function ok(result: CliResult): CliResult {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

/** Starts the CLI and SIGKILLs it after `afterMs`; resolves when it is gone. */
export function killedAfter(args: string[], env: Record<string, string>, afterMs: number): Promise<number | null> {
  return new Promise((resolve) => {
    const clean: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('LICENSE_')) clean[k] = v;
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...clean, ...env }, stdio: 'ignore' });
    const timer = setTimeout(() => child.kill('SIGKILL'), afterMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

/**
 * Starts the CLI and SIGKILLs it as soon as `moment()` holds (checked every few
 * milliseconds), to land a kill in one phase whatever the machine's speed; resolves with
 * the exit code and whether the moment came before the process ended on its own.
 */
export function killedWhen(args: string[], env: Record<string, string>, moment: () => boolean): Promise<{ code: number | null; hit: boolean }> {
  return new Promise((resolve) => {
    const clean: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('LICENSE_')) clean[k] = v;
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...clean, ...env }, stdio: 'ignore' });
    let hit = false;
    const timer = setInterval(() => {
      if (!hit && moment()) {
        hit = true;
        child.kill('SIGKILL');
      }
    }, 2);
    child.on('exit', (code) => {
      clearInterval(timer);
      resolve({ code, hit });
    });
  });
}
