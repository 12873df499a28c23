import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CLI } from './cli.js';
import { checkAnswer } from './openapi-check.js';
import { scaledMs } from './busy-machine.js';
import { PG_OVERLAP_MARKER } from './pg-overlap.js';

export interface ServeProcess {
  readonly url: string;
  /** The bootstrap admin token, when this process printed one. */
  readonly token: string | undefined;
  readonly fingerprint: string;
  readonly child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  stdout(): string;
  stderr(): string;
  /** Sends the signal and resolves with the exit code and how long the exit took. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; ms: number }>;
}

const running = new Set<ChildProcess>();

/** Kills what a failed test left running, so that mocha can exit. */
export function killAllServes(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

/**
 * Starts a real `license-server serve` on a free loopback port, as an operator would,
 * and waits for its banner. The environment is clean apart from `env`. `onOutput` sees
 * stdout and stderr as they come, before the banner too (a daemon waiting to start), and the
 * process, for a test that must signal it the moment something shows.
 */
export function startServe(env: Record<string, string>, args: string[] = [], onOutput?: (stdout: string, stderr: string, child: ChildProcess) => void): Promise<ServeProcess> {
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) clean[name] = value;
  const cwd = mkdtempSync(path.join(tmpdir(), 'license-serve-'));
  const portArgs = args.includes('--port') ? [] : ['--port', '0'];
  const child = spawn(process.execPath, [CLI, 'serve', ...portArgs, ...args], {
    cwd,
    env: { ...clean, LICENSE_DATA_DIR: path.join(cwd, 'data'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    onOutput?.(out, err, child);
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
    onOutput?.(out, err, child);
  });
  // 'close', not 'exit': by then everything the process wrote has been read.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  // Outside any promise a test awaits: mocha fails whichever test is running (pg-overlap.ts).
  void exited.then((code) => {
    if (!err.includes(PG_OVERLAP_MARKER)) return;
    const error = new Error(`serve sent a statement to a pg connection still running another (exit ${code}):\n${err}`);
    process.nextTick(() => {
      throw error;
    });
  });
  return new Promise((resolve, reject) => {
    const limit = scaledMs(20_000);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start within ${limit} ms\nstdout: ${out}\nstderr: ${err}`));
    }, limit);
    const check = () => {
      const url = /listening on (https?:\/\/\S+)/.exec(out)?.[1];
      const fingerprint = /signing key fingerprint: ([0-9a-f]{64})/.exec(out)?.[1];
      if (!url || !fingerprint || !/^admin token/m.test(out)) return;
      clearTimeout(timer);
      child.stdout!.off('data', check);
      resolve({
        url,
        fingerprint,
        token: /admin token \(shown only this once, store it now\): (lsat_\S+)/.exec(out)?.[1],
        child,
        stdout: () => out,
        stderr: () => err,
        async stop(signal = 'SIGTERM') {
          const started = Date.now();
          if (child.exitCode === null) child.kill(signal);
          const code = await exited;
          return { code, ms: Date.now() - started };
        },
      });
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code} before listening\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

/** JSON over fetch with an optional bearer token; returns status, headers and parsed body. */
export async function api(
  base: string,
  method: string,
  route: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string>; raw?: string | Buffer } = {},
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | Buffer | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${base}${route}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/** An HTTP request sent exactly as written (fetch would normalise `..` away before sending). */
export function rawRequest(
  base: string,
  method: string,
  path: string,
  /** `notTheApi`: a listener docs/openapi.json does not describe (server.metrics_port's), so its answers are not checked against it. */
  options: { headers?: Record<string, string>; body?: string; notTheApi?: boolean } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: any; text: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ hostname, port, method, path, headers: options.headers }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        const status = response.statusCode ?? 0;
        if (response.headers['x-request-id'] !== undefined && !options.notTheApi) {
          try {
            const header = (name: string) => [response.headers[name]].flat()[0];
            checkAnswer({ method, path: path.split('?')[0]!, status, header, text: method === 'HEAD' ? undefined : text });
          } catch (error) {
            reject(error);
            return;
          }
        }
        resolve({ status, headers: response.headers, body, text });
      });
    });
    request.on('error', reject);
    request.end(options.body);
  });
}
