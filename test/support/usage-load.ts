import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { api, type ServeProcess } from './serve.js';
import { onDatabase } from './postgres.js';
import { scaledMs } from './busy-machine.js';

/** One request of the load: when it was sent and answered (ms since the load began), and how. */
export interface Exchange {
  readonly key: string;
  readonly sent: number;
  readonly answered: number;
  /** `201`, `503 DATABASE_UNAVAILABLE`, ... or `network: ECONNRESET` when no HTTP answer came. */
  readonly outcome: string;
}

export interface UsageLoad {
  /** Every request answered so far. */
  readonly exchanges: readonly Exchange[];
  /** Requests sent and not answered yet. */
  inFlight(): Array<{ key: string; sent: number }>;
  /** Milliseconds since the load began (the clock of `sent` and `answered`). */
  now(): number;
  /** Idempotency keys of the reports answered 2xx (counted: they must be in the database). */
  acknowledged(): string[];
  /** Ends the load once the requests in flight are answered. */
  stop(): Promise<void>;
}

/**
 * Usage reports (POST /api/v1/usage), `connections` at a time spread over `bases`, each with
 * an idempotency key of its own, until stop(): the load of a fleet of clients, whose every
 * exchange is kept so that a test can tell which writes were acknowledged and what each
 * request got during a fault.
 */
export function startUsageLoad(bases: readonly string[], licenseKey: string, connections: number): UsageLoad {
  const started = Date.now();
  const now = () => Date.now() - started;
  const prefix = randomBytes(4).toString('hex');
  const exchanges: Exchange[] = [];
  const pending = new Map<string, number>();
  let stopped = false;
  const worker = async (n: number) => {
    const base = bases[n % bases.length]!;
    for (let i = 0; !stopped; i += 1) {
      const key = `${prefix}-${n}-${i}`;
      const sent = now();
      pending.set(key, sent);
      let outcome: string;
      try {
        const answer = await api(base, 'POST', '/api/v1/usage', {
          body: { license_key: licenseKey, hardware_id: `load-${n}`, entitlement_code: 'calls', quantity: 1, occurred_at: new Date().toISOString(), idempotency_key: key },
        });
        outcome = answer.body?.error?.code ? `${answer.status} ${answer.body.error.code}` : String(answer.status);
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause;
        outcome = `network: ${cause?.code ?? cause?.message ?? (error as Error).message}`;
      }
      pending.delete(key);
      exchanges.push({ key, sent, answered: now(), outcome });
      // A refused client backs off, as a real one does, and leaves the CPU to the daemon (and to a proxy in this process).
      if (!outcome.startsWith('2')) await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  const workers = Promise.all(Array.from({ length: connections }, (_, n) => worker(n)));
  return {
    exchanges,
    inFlight: () => [...pending].map(([key, sent]) => ({ key, sent })),
    now,
    acknowledged: () => exchanges.filter((exchange) => exchange.outcome.startsWith('2')).map((exchange) => exchange.key),
    async stop() {
      stopped = true;
      await workers;
    },
  };
}

/** How many exchanges ended each way, e.g. `{"201": 812, "503 DATABASE_UNAVAILABLE": 95}`. */
export function tally(exchanges: readonly Exchange[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { outcome } of exchanges) counts[outcome] = (counts[outcome] ?? 0) + 1;
  return counts;
}

/** A customer, the entitlement `calls` and a usage-based license with no limit on it; returns its key. */
export async function usageLicense(base: string, token: string): Promise<string> {
  const customer = await api(base, 'POST', '/api/customers', { token, body: { name: 'Load Co' } });
  await api(base, 'POST', '/api/entitlements', { token, body: { code: 'calls', name: 'Calls' } });
  const license = await api(base, 'POST', '/api/licenses', {
    token,
    body: { customer_id: customer.body.id, type: 'usage_based', valid_until: '2099-12-31', entitlements: [{ code: 'calls', usage_limit: null }] },
  });
  if (license.status !== 201) throw new Error(`cannot create the license: ${license.text}`);
  return license.body.key as string;
}

/** The acknowledged usage reports whose idempotency key is not in `url`'s usage_records. */
export async function lostReports(url: string, acknowledged: readonly string[]): Promise<string[]> {
  const kept = await onDatabase(url, async (client) => new Set((await client.query<{ key: string }>('SELECT idempotency_key AS key FROM usage_records')).rows.map((row) => row.key)));
  return acknowledged.filter((key) => !kept.has(key));
}

/** Waits until `check` holds, polling; fails with `what` after `ms`. */
export async function eventuallyTrue(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const limit = scaledMs(ms);
  const deadline = Date.now() + limit;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${limit} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Whether `base` answers /readyz with 200, false on any other answer or none. */
export async function ready(base: string): Promise<boolean> {
  return api(base, 'GET', '/readyz').then((answer) => answer.status === 200, () => false);
}

export const UNAVAILABLE = '503 DATABASE_UNAVAILABLE';

/** The last lines of a daemon's standard error but its request log: a crash, say. */
export function stderrTail(serve: ServeProcess): string {
  return serve.stderr().split('\n').filter((line) => !line.includes('"msg":"request"')).slice(-25).join('\n');
}

/**
 * After a fault under `load`: the daemons are still running, every exchange was a 201 or a
 * 503 DATABASE_UNAVAILABLE (and some were refused: the fault was felt), none ended without
 * an HTTP answer, and every report acknowledged is in `url`'s database.
 */
export async function assertSurvived(url: string, daemons: readonly ServeProcess[], load: UsageLoad): Promise<void> {
  for (const serve of daemons) assert.equal(serve.child.exitCode, null, `the daemon died:\n${stderrTail(serve)}`);
  const counts = tally(load.exchanges);
  const unexpected = Object.keys(counts).filter((outcome) => outcome !== '201' && outcome !== UNAVAILABLE);
  assert.deepEqual(unexpected, [], `answers other than 201 and ${UNAVAILABLE}: ${JSON.stringify(counts)}`);
  assert.ok((counts[UNAVAILABLE] ?? 0) > 0, `requests during the fault were refused with ${UNAVAILABLE}: ${JSON.stringify(counts)}`);
  const lost = await lostReports(url, load.acknowledged());
  assert.deepEqual(lost, [], `${lost.length} of the ${load.acknowledged().length} reports answered 201 are not in the database`);
}

/** The daemons serve again after a fault: ready, and 100 more reports acknowledged. */
export async function servesAgain(daemons: readonly ServeProcess[], load: UsageLoad): Promise<void> {
  for (const serve of daemons) {
    await eventuallyTrue(() => serve.child.exitCode !== null || ready(serve.url), 20_000, `${serve.url} to be ready again`);
    assert.equal(serve.child.exitCode, null, `the daemon died:\n${stderrTail(serve)}`);
  }
  const before = load.acknowledged().length;
  await eventuallyTrue(() => load.acknowledged().length >= before + 100, 20_000, 'reports acknowledged after the fault');
}
