import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { scaledMs } from './busy-machine.js';

/**
 * Debian's real Prometheus (/usr/bin/prometheus, package prometheus) on a loopback port,
 * scraping what a test names every second, with its own configuration and TSDB in a fresh
 * temporary directory; and promtool, for checking rule files.
 *
 *   const prom = await startPrometheus([{ address: '127.0.0.1:9464', credentials: token }]);
 *   await prom.waitFor('license_server_store_up', (v) => v === 1);
 *   await prom.stop();
 */
export const PROMETHEUS = '/usr/bin/prometheus';
export const PROMTOOL = '/usr/bin/promtool';

/** Why Prometheus (or promtool) cannot run here, or undefined. */
export function prometheusProblem(program: string = PROMETHEUS): string | undefined {
  if (!existsSync(program)) return `${program} is not installed (Debian package prometheus)`;
  return undefined;
}

/** For a suite's before(): under CI=true a missing Prometheus fails the suite; elsewhere it skips, loudly. */
export function requirePrometheus(context: Mocha.Context, program: string = PROMETHEUS): void {
  const problem = prometheusProblem(program);
  if (!problem) return;
  if (process.env.CI === 'true') throw new Error(`Prometheus is required under CI=true: ${problem}`);
  console.warn(`    (skipping: ${problem})`);
  context.skip();
}

export interface ScrapeTarget {
  /** host:port */
  readonly address: string;
  /** A bearer token, written to a file Prometheus reads (authorization.credentials_file). */
  readonly credentials?: string;
}

export interface TestPrometheus {
  readonly url: string;
  /** One instant query (/api/v1/query): each series' labels and value. */
  query(expression: string): Promise<Array<{ metric: Record<string, string>; value: number }>>;
  /** Polls `expression` until one series' value satisfies `accept` (or throws after `timeoutMs`). */
  waitFor(expression: string, accept: (value: number) => boolean, timeoutMs?: number): Promise<number>;
  /** The targets' scrape state (/api/v1/targets), for a failing test's message. */
  targets(): Promise<unknown>;
  /** The alerting rules of the rule files and their state (/api/v1/rules?type=alert). */
  alertRules(): Promise<AlertRule[]>;
  log(): string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface AlertRule {
  readonly name: string;
  /** inactive, pending (its expression holds, its `for` not yet over) or firing. */
  readonly state: string;
  /** When the rule was last evaluated (RFC 3339). */
  readonly lastEvaluation: string;
  readonly health: string;
  readonly alerts: ReadonlyArray<{ readonly labels: Record<string, string>; readonly state: string; readonly value: string }>;
}

/** `ruleFiles`: rule files to load (`rule_files:`), evaluated every second. */
export async function startPrometheus(targets: readonly ScrapeTarget[], options: { ruleFiles?: readonly string[] } = {}): Promise<TestPrometheus> {
  const dir = mkdtempSync(path.join(tmpdir(), 'license-prometheus-'));
  const jobs = targets.map((target, i) => {
    let auth = '';
    if (target.credentials !== undefined) {
      const file = path.join(dir, `token-${i}`);
      writeFileSync(file, target.credentials, { mode: 0o600 });
      auth = `\n    authorization:\n      credentials_file: ${JSON.stringify(file)}`;
    }
    return `  - job_name: license-server-${i}\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [${JSON.stringify(target.address)}]${auth}`;
  });
  const config = path.join(dir, 'prometheus.yml');
  const rules = options.ruleFiles?.length ? `rule_files:\n${options.ruleFiles.map((file) => `  - ${JSON.stringify(file)}`).join('\n')}\n` : '';
  writeFileSync(config, `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n${rules}scrape_configs:\n${jobs.join('\n')}\n`);
  // Prometheus has no port 0: a free port is found first, and another tried if it was taken meanwhile.
  for (let attempt = 0; ; attempt += 1) {
    const port = await freePort();
    const child = spawn(PROMETHEUS, [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + scaledMs(20_000);
    let ready = false;
    while (Date.now() < deadline && child.exitCode === null) {
      ready = await fetch(`${url}/-/ready`).then((response) => response.ok, () => false);
      if (ready) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (!ready) {
      child.kill('SIGKILL');
      await exited;
      if (/address already in use/.test(log) && attempt < 3) continue;
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`prometheus did not become ready:\n${log}`);
    }
    const query = async (expression: string) => {
      const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expression)}`);
      const body = (await response.json()) as { status: string; error?: string; data?: { resultType: string; result: Array<{ metric: Record<string, string>; value: [number, string] }> } };
      if (body.status !== 'success') throw new Error(`query ${expression}: ${body.error}`);
      return body.data!.result.map((series) => ({ metric: series.metric, value: Number(series.value[1]) }));
    };
    const targetsState = async () => ((await (await fetch(`${url}/api/v1/targets`)).json()) as { data: unknown }).data;
    const alertRules = async () => {
      const body = (await (await fetch(`${url}/api/v1/rules?type=alert`)).json()) as { data: { groups: Array<{ rules: AlertRule[] }> } };
      return body.data.groups.flatMap((group) => group.rules);
    };
    return {
      url,
      query,
      targets: targetsState,
      alertRules,
      async waitFor(expression, accept, timeoutMs = 20_000) {
        const until = Date.now() + scaledMs(timeoutMs);
        let seen: unknown = [];
        while (Date.now() < until) {
          const result = await query(expression);
          seen = result;
          const hit = result.find((series) => accept(series.value));
          if (hit) return hit.value;
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
        throw new Error(`${expression}: no accepted value within ${timeoutMs} ms; last ${JSON.stringify(seen)}; targets ${JSON.stringify(await targetsState())}`);
      },
      log: () => log,
      async stop() {
        if (child.exitCode === null) child.kill('SIGTERM');
        await exited;
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
}

/** `promtool test rules FILE`: runs a rule unit test file (rule_files, input_series, alert_rule_test). */
export function testRules(file: string): { code: number | null; output: string } {
  const result = spawnSync(PROMTOOL, ['test', 'rules', file], { encoding: 'utf8' });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

/** `promtool check rules FILE`: its exit code and output. */
export function checkRules(file: string): { code: number | null; output: string } {
  const result = spawnSync(PROMTOOL, ['check', 'rules', file], { encoding: 'utf8' });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}
