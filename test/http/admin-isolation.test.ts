import assert from 'node:assert/strict';
import autocannon from 'autocannon';
// @ts-expect-error: JavaScript without types, shared with bench/scale.mjs (it imports dist/).
import { buildScaleStore } from '../../bench/lib/scale-store.mjs';
import { forEachEngine } from '../support/engines.js';
import { ADMIN_URL } from '../support/postgres.js';
import { startServe, type ServeProcess } from '../support/serve.js';

/**
 * No admin request stalls client validation (issue 24, item 2). At size M (100k licenses,
 * 1M audit rows) two connections loop the heaviest admin lists while 18 validate; beside
 * them validation keeps at least 0.7x of its rate alone, measured in the same run, and a
 * p99 under 100 ms (or 2x its p99 alone, where that is higher).
 * Before the admin work moved off the clients' path, SQLite validation fell from thousands
 * of requests a second to tens (the synchronous driver ran each list on the thread that
 * answers clients), and PostgreSQL's filled its one pool.
 */
const CLIENTS = 18;
const ROUNDS = 4;
const WINDOW_SECONDS = 2;
const LICENSES = 100_000;

interface Figures {
  readonly rate: number;
  readonly p99: number;
  readonly requests: number;
  readonly non2xx: number;
  readonly errors: number;
}

forEachEngine('validation beside heavy admin requests', (fixture) => {
  let serve: ServeProcess;
  let store: ScaleStore | undefined;
  let adminToken: string;
  let auditEntityId: string;
  let validate: { path: string; body: string };
  // The store takes most of the time: built once for every case of this engine.
  before(async function () {
    this.timeout(300_000);
    // A ratio of throughputs: another suite running on the same cores meanwhile would blur it,
    // so CI skips it (and the store it needs) in the suites it runs at once, and runs it alone
    // afterwards (.ci/run, ALONE_TESTS).
    if (process.env.LICENSE_TEST_RUN_ALONE === 'skip') this.skip();
    // cache: false: built for this run and dropped after it (bench/.stores is the bench's).
    store = (await buildScaleStore({ size: 'M', cache: false, ...(fixture.engine === 'postgres' ? { postgres: ADMIN_URL } : {}) })) as ScaleStore;
    assert.equal(store.counts.licenses, LICENSES);
    adminToken = store.adminToken;
    auditEntityId = store.sample.auditEntityIds[0]!;
    serve = await startServe({ ...store.env, LICENSE_CLIENT_RATE_LIMIT: '0' });
    // A license and machine already in the store: the customers' everyday validation.
    validate = { path: '/api/v1/validate', body: JSON.stringify({ license_key: store.sample.licenseKeys[0], hardware_id: store.sample.hardwareIds[0], version: '1.0.0' }) };
  });
  after(async () => {
    await serve?.stop();
    await store?.dispose();
  });

  async function api(method: string, path: string, body?: unknown): Promise<Record<string, string>> {
    const response = await fetch(serve.url + path, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    assert.ok(response.ok, `${method} ${path}: ${response.status} ${await response.clone().text()}`);
    return (await response.json()) as Record<string, string>;
  }

  /** 90% into the licenses, or the deepest offset the daemon takes where it caps them (deeper pages come by cursor). */
  async function deepestOffset(): Promise<number> {
    for (const offset of [LICENSES - 10_000, 10_000, 1_000]) {
      const response = await fetch(`${serve.url}/api/licenses?limit=1&offset=${offset}`, { headers: { authorization: `Bearer ${adminToken}` } });
      await response.arrayBuffer();
      if (response.ok) return offset;
    }
    throw new Error('no deep offset is accepted');
  }

  async function validations(seconds: number): Promise<Figures> {
    const result = await autocannon({
      url: serve.url + validate.path,
      method: 'POST',
      connections: CLIENTS,
      duration: seconds,
      headers: { 'content-type': 'application/json' },
      body: validate.body,
    });
    return { rate: result.requests.average, p99: result.latency.p99, requests: result.requests.total, non2xx: result.non2xx, errors: result.errors + result.timeouts };
  }

  /** Two connections, each asking for the admin pages in turn, until `stop`. */
  function adminLoad(paths: readonly string[]): { stop(): Promise<Figures> } {
    const instance = autocannon({
      url: serve.url,
      connections: 2,
      duration: 3600,
      timeout: 30,
      headers: { authorization: `Bearer ${adminToken}` },
      requests: paths.map((path) => ({ method: 'GET', path })),
    });
    const done = new Promise<autocannon.Result>((resolve) => instance.on('done', resolve));
    return {
      async stop() {
        instance.stop();
        const result = await done;
        return { rate: result.requests.average, p99: result.latency.p99, requests: result.requests.total, non2xx: result.non2xx, errors: result.errors + result.timeouts };
      },
    };
  }

  it('keeps 0.7x of its rate alone and a p99 under 100 ms while two connections loop deep and big list pages', async function () {
    this.timeout(120_000);
    const deep = await deepestOffset();
    const heavy = [
      `/api/licenses?limit=50&offset=${deep}`,
      '/api/licenses?limit=1000',
      '/api/audit?entity_type=license&until=2030-01-01T00:00:00.000Z&limit=1000',
      `/api/audit?entity_id=${auditEntityId}`,
      `/api/licenses?limit=50&offset=${Math.floor(deep / 2)}&active=true`,
    ];
    // Each page answers alone first: a load of failures would measure nothing.
    for (const path of heavy) await api('GET', path);
    await validations(2); // warm-up: JIT, prepared statements, pools
    // Windows alone and beside the admin load take turns, so that what else the machine
    // runs meanwhile weighs on both alike.
    const alone: Figures[] = [];
    const beside: Figures[] = [];
    const admin: Figures[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      alone.push(await validations(WINDOW_SECONDS));
      const load = adminLoad(heavy);
      // The admin connections are under way before the measured window starts.
      await new Promise((resolve) => setTimeout(resolve, 300));
      beside.push(await validations(WINDOW_SECONDS));
      admin.push(await load.stop());
      // Admin reads pass one at a time, in order: once this one is answered, the pages the
      // stopped connections left running are done, and the next window is alone indeed.
      await api('GET', '/api/whoami');
    }
    const rate = (windows: Figures[]) => windows.reduce((sum, w) => sum + w.requests, 0) / (windows.length * WINDOW_SECONDS);
    const p99 = (windows: Figures[]) => median(windows.map((w) => w.p99));
    const sum = (windows: Figures[], key: 'requests' | 'non2xx' | 'errors') => windows.reduce((total, w) => total + w[key], 0);
    const ratio = rate(beside) / rate(alone);
    const report = `${fixture.engine}: validation alone ${rate(alone).toFixed(0)} req/s p99 ${p99(alone)} ms; beside admin load ${rate(beside).toFixed(0)} req/s p99 ${p99(beside)} ms (${ratio.toFixed(2)}x); admin ${sum(admin, 'requests')} requests, p99 ${Math.max(...admin.map((w) => w.p99))} ms, ${sum(admin, 'non2xx')} non-2xx (p99: median of ${ROUNDS} windows of ${WINDOW_SECONDS} s)`;
    console.log(`      ${report}`);
    assert.equal(sum(alone, 'non2xx') + sum(alone, 'errors') + sum(beside, 'non2xx') + sum(beside, 'errors'), 0, report);
    // The admin requests were answered, not refused: isolation by 503 would be no isolation.
    assert.ok(sum(admin, 'requests') >= ROUNDS && sum(admin, 'non2xx') === 0 && sum(admin, 'errors') === 0, report);
    assert.ok(ratio >= 0.7, report);
    // The tail beside the admin load: under 100 ms, or twice the tail alone where that is
    // higher. On two cores a PostgreSQL admin read burns one core in its backend, which the
    // gate cannot yield: 32 ms alone and 63 ms beside in CI on 2026-11-26, 69 and 80 ms in
    // another CI run, 38 and 60 ms here (and 51-150 ms alone with other suites beside it; CI
    // runs this test alone). SQLite stays under 15 ms. A stall, which this test is about
    // (issue 24: one list page stopped validation), shows as seconds.
    assert.ok(p99(beside) < Math.max(100, 2 * p99(alone)), report);
  });
});

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** What bench/lib/scale-store.mjs returns, as far as this test uses it. */
interface ScaleStore {
  readonly counts: { readonly licenses: number };
  readonly env: Record<string, string>;
  readonly adminToken: string;
  readonly sample: { readonly licenseKeys: string[]; readonly hardwareIds: string[]; readonly auditEntityIds: string[] };
  dispose(): Promise<void>;
}
