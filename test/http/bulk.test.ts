import assert from 'node:assert/strict';
import { LICENSE_FILTER_QUERY } from '../../src/http/list-filters.js';
import { createCustomer } from '../../src/lib/customers.js';
import { createLicense, type License } from '../../src/lib/licensing/licenses.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database } from '../../src/lib/storage/types.js';
import { scaledMs } from '../support/busy-machine.js';
import { forEachEngine } from '../support/engines.js';
import { FakeClock } from '../support/fake-clock.js';
import { IN_PROCESS_ADMIN_TOKEN, startInProcessDaemon, type InProcessDaemon } from '../support/in-process-daemon.js';
import { deliveries, everyEventToWebhook } from '../support/outbox-rows.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const DAY = 86_400_000;

type Answer = Awaited<ReturnType<typeof api>>;

function refused(answer: Answer, status: number, code: string): void {
  assert.equal(answer.status, status, answer.text);
  assert.equal(answer.body.error.code, code, answer.text);
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, ms = scaledMs(30_000)): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Every row of a list, page after page by its Link header. */
async function everyPage(base: string, token: string, route: string): Promise<any[]> {
  const rows: any[] = [];
  let next: string | undefined = route;
  while (next) {
    const page = await api(base, 'GET', next, { token });
    assert.equal(page.status, 200, page.text);
    rows.push(...page.body);
    next = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
  }
  return rows;
}

forEachEngine('bulk actions over HTTP (in-process daemon)', (fixture) => {
  const clock = new FakeClock(Date.parse('2026-11-23T10:00:00.000Z'));
  let daemon: InProcessDaemon;
  let support: string;
  let reader: string;
  /** Resolves the batch the test holds, when one is held (batchHeld). */
  let holdBatches: Promise<void> | undefined;
  const as = (token: string, method: string, route: string, body?: unknown) => api(daemon.url, method, route, { token, ...(body === undefined ? {} : { body }) });
  const admin = (method: string, route: string, body?: unknown) => as(IN_PROCESS_ADMIN_TOKEN, method, route, body);
  const job = async (id: string) => (await as(reader, 'GET', `/api/bulk/${id}`)).body;
  const finished = (id: string) => waitFor(() => job(id), (body) => ['done', 'failed', 'cancelled'].includes(body.state), `job ${id} to end`);

  before(async () => {
    const url = await fixture.freshUrl();
    daemon = await startInProcessDaemon(url, () => clock.now(), { bulk: { batchSize: 3, batchMs: 60_000, yieldFactor: 0, onBatch: () => holdBatches } });
    await everyEventToWebhook(daemon.db);
    const token = async (name: string, scopes: string[]) => (await admin('POST', '/api/tokens', { name, scopes })).body.token as string;
    support = await token('support', ['licenses', 'read']);
    reader = await token('reader', ['read']);
  });
  after(async () => {
    await daemon?.stop();
  });

  async function customerWith(ends: readonly number[]): Promise<{ customerId: string; licenses: License[] }> {
    const customerId = (await admin('POST', '/api/customers', { name: `Customer ${ends.length} ${clock.now().getTime()}` })).body.id as string;
    const licenses: License[] = [];
    for (const days of ends) {
      clock.set(new Date(clock.now().getTime() + 1));
      const made = await admin('POST', '/api/licenses', { customer_id: customerId, type: 'time_based', valid_until: new Date(clock.now().getTime() + days * DAY).toISOString() });
      assert.equal(made.status, 201, made.text);
      licenses.push(made.body);
    }
    return { customerId, licenses };
  }

  const renewals = async (id: string) => (await admin('GET', `/api/audit?entity_type=license&entity_id=${id}&action=license.renewed`)).body.length as number;
  const events = async (id: string) => (await deliveries(daemon.db, 'license.renewed')).filter((row) => row.data.license_id === id).length;

  it('preview the count the list gives for the same filter, and the first rows', async () => {
    const { customerId } = await customerWith([10, 20, 30, 40, 50, 60, 70]);
    await admin('POST', '/api/licenses', { customer_id: customerId, type: 'usage_based', valid_until: '2030-01-01' });
    const filters: Array<Record<string, string>> = [{ customer_id: customerId }, { customer_id: customerId, type: 'usage_based' }, { active: 'true' }, {}];
    for (const filter of filters) {
      const listed = await everyPage(daemon.url, reader, `/api/licenses?${new URLSearchParams({ ...filter, limit: '3' })}`);
      const preview = await as(support, 'POST', '/api/bulk', { target: 'licenses', action: 'extend', by: '30d', filter, dry_run: true });
      assert.equal(preview.status, 200, preview.text);
      assert.equal(preview.body.count, listed.length, JSON.stringify(filter));
      assert.deepEqual(preview.body.first.map((license: License) => license.id), listed.slice(0, 5).map((license) => license.id));
      assert.ok(preview.body.first.every((license: License) => typeof license.key === 'string'), 'a licenses token sees keys, as in the list');
    }
    assert.equal((await as(reader, 'GET', '/api/bulk')).body.length, 0, 'a preview makes no job');
  });

  it('extend every license of a filter once, in batches, with progress, one audit entry and one event each', async () => {
    const { customerId, licenses } = await customerWith([5, 6, 7, 8, 9, 10, 11, 12]);
    const started = await as(support, 'POST', '/api/bulk', { target: 'licenses', action: 'extend', by: '30d', filter: { customer_id: customerId } });
    assert.equal(started.status, 202, started.text);
    assert.equal(started.headers.get('location'), `/api/bulk/${started.body.id}`);
    assert.deepEqual([started.body.target, started.body.action, started.body.by, started.body.filter, started.body.total, started.body.created_by], ['licenses', 'extend', '30d', { customer_id: customerId }, 8, 'token:support']);
    const end = await finished(started.body.id);
    assert.deepEqual([end.state, end.done, end.changed, end.failed, end.errors], ['done', 8, 8, 0, []]);
    for (const license of licenses) {
      const now = (await as(reader, 'GET', `/api/licenses/${license.id}`)).body as License;
      assert.equal(now.valid_until, new Date(Date.parse(license.valid_until) + 30 * DAY).toISOString());
      assert.equal(await renewals(license.id), 1);
      assert.equal(await events(license.id), 1);
    }
    const listed = await as(reader, 'GET', '/api/bulk');
    assert.equal(listed.body[0].id, started.body.id, 'newest first');
    const audit = await admin('GET', `/api/audit?entity_type=bulk_job&entity_id=${started.body.id}`);
    assert.deepEqual(audit.body.map((entry: { action: string; actor: string }) => [entry.action, entry.actor]), [['bulk.finished', 'token:support'], ['bulk.started', 'token:support']]);
  });

  // The filters of issue36-filters (status, within): this runs once they are in the list's parser.
  ((LICENSE_FILTER_QUERY as readonly string[]).includes('within') ? it : it.skip)(
    'extend every license expiring within 30 days once, though the extension takes it out of the filter',
    async () => {
      const { customerId, licenses } = await customerWith([2, 5, 9, 14, 20, 29, 45]);
      const filter = { customer_id: customerId, status: 'expiring', within: '30d' };
      const before = await everyPage(daemon.url, reader, `/api/licenses?${new URLSearchParams(filter)}`);
      assert.equal(before.length, 6);
      const started = await as(support, 'POST', '/api/bulk', { target: 'licenses', action: 'extend', by: '30d', filter });
      const end = await finished(started.body.id);
      assert.deepEqual([end.total, end.changed], [6, 6]);
      for (const [i, license] of licenses.entries()) assert.equal(await renewals(license.id), i < 6 ? 1 : 0);
      assert.equal((await everyPage(daemon.url, reader, `/api/licenses?${new URLSearchParams(filter)}`)).length, 0, 'each now ends 30 days later, past the window');
    },
  );

  it('refuse a second job with 409 BULK_JOB_RUNNING while one runs, and let it be cancelled', async () => {
    const { customerId, licenses } = await customerWith([5, 6, 7, 8, 9, 10, 11]);
    let release: () => void = () => undefined;
    holdBatches = new Promise((resolve) => (release = resolve));
    try {
      const started = await as(support, 'POST', '/api/bulk', { target: 'licenses', action: 'suspend', filter: { customer_id: customerId } });
      assert.equal(started.status, 202, started.text);
      await waitFor(() => job(started.body.id), (body) => body.state === 'running' && body.done === 3, 'the first batch');
      const second = await as(support, 'POST', '/api/bulk', { target: 'machines', action: 'deactivate', filter: {} });
      refused(second, 409, 'BULK_JOB_RUNNING');
      assert.match(second.body.error.message, new RegExp(started.body.id));
      const preview = await as(support, 'POST', '/api/bulk', { target: 'machines', action: 'deactivate', filter: {}, dry_run: true });
      assert.equal(preview.status, 200, 'a preview is no job, and is answered meanwhile');
      const cancelled = await as(support, 'POST', `/api/bulk/${started.body.id}/cancel`);
      assert.equal(cancelled.status, 200, cancelled.text);
      assert.deepEqual([cancelled.body.state, cancelled.body.done], ['cancelled', 3]);
    } finally {
      release();
      holdBatches = undefined;
    }
    const suspended = await Promise.all(licenses.map(async (license) => (await as(reader, 'GET', `/api/licenses/${license.id}`)).body.active));
    assert.deepEqual(suspended, [false, false, false, true, true, true, true]);
    const id = (await as(reader, 'GET', '/api/bulk')).body[0].id;
    refused(await as(support, 'POST', `/api/bulk/${id}/cancel`), 409, 'BULK_JOB_FINISHED');
  });

  it('report the rows refused by id and code, and do the rest', async () => {
    const { customerId, licenses } = await customerWith([5, 6, 7, 8]);
    await admin('POST', `/api/licenses/${licenses[2]!.id}/deactivate`);
    const started = await as(support, 'POST', '/api/bulk', { target: 'licenses', action: 'extend', by: '1y', filter: { customer_id: customerId } });
    const end = await finished(started.body.id);
    assert.deepEqual([end.state, end.changed, end.failed], ['done', 3, 1]);
    assert.deepEqual(end.errors.map((error: { id: string; code: string }) => [error.id, error.code]), [[licenses[2]!.id, 'LICENSE_INACTIVE']]);
  });

  it('refuse a read token every bulk action (403 TOKEN_SCOPE) and show it the jobs', async () => {
    for (const [method, route, body] of [
      ['POST', '/api/bulk', { target: 'licenses', action: 'suspend', filter: {} }],
      ['POST', '/api/bulk', { target: 'licenses', action: 'suspend', filter: {}, dry_run: true }],
      ['POST', '/api/bulk/00000000-0000-4000-8000-000000000000/cancel', {}],
    ] as const) {
      refused(await as(reader, method, route, body), 403, 'TOKEN_SCOPE');
    }
    assert.equal((await as(reader, 'GET', '/api/bulk')).status, 200);
    refused(await as(reader, 'GET', '/api/bulk/00000000-0000-4000-8000-000000000000'), 404, 'BULK_JOB_NOT_FOUND');
    refused(await as(reader, 'GET', '/api/bulk/nope'), 400, 'INVALID_ID');
  });

  it('refuse a bad request with 400 and make nothing', async () => {
    const cases: Array<[unknown, string]> = [
      [{ target: 'licenses', action: 'extend', filter: {} }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'extend', by: '30d', filter: { active: true } }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'extend', by: '30d', filter: { limit: '5' } }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'extend', by: '30d', filter: ['active=true'] }, 'INVALID_INPUT'],
      [{ target: 'machines', action: 'deactivate', filter: { holding_seat: 'maybe' } }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'suspend', dry_run: 'yes' }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'suspend', confirm: true }, 'INVALID_INPUT'],
    ];
    for (const [body, code] of cases) refused(await as(support, 'POST', '/api/bulk', body), 400, code);
    assert.ok((await as(reader, 'GET', '/api/bulk')).body.every((listed: { state: string }) => !['queued', 'running'].includes(listed.state)));
  });
});

/**
 * A real `serve` stopped (SIGTERM) and killed (SIGKILL) in the middle of a job. The test holds
 * the job still where it must be mid-way: on PostgreSQL by locking a license the job has yet to
 * reach (its batch then waits inside its transaction, with the rows before it changed and not
 * committed), on SQLite by holding the database's write lock (the next batch waits to begin).
 */
forEachEngine('bulk jobs when their daemon stops (serve)', (fixture) => {
  let url: string;
  let db: Database;
  let serve: ServeProcess | undefined;
  const TOKEN = 'bulk-serve-admin-token-0123456789';
  /** In the order the job walks them. */
  let licenses: License[] = [];

  before(async function () {
    this.timeout(120_000);
    url = await fixture.freshUrl();
    db = await openDatabase(url);
    await everyEventToWebhook(db);
    const context = { actor: 'cli:setup' };
    const customerId = (await createCustomer(db, { name: 'Many Licenses Ltd' }, context)).id;
    // Enough that SQLite's job cannot end between two looks of the test; PostgreSQL's waits on a lock.
    const count = fixture.engine === 'sqlite' ? 1200 : 300;
    for (let i = 0; i < count; i += 1) licenses.push(await createLicense(db, { customerId, type: 'time_based', validUntil: new Date(Date.now() + (10 + (i % 300)) * DAY).toISOString() }, context));
    const order = (await db.query('SELECT id FROM licenses ORDER BY created_at, id')).map((row) => String(row.id));
    licenses = order.map((id) => licenses.find((license) => license.id === id)!);
  });
  /** The hold the test has on the job, if any (hold()). */
  let holding: (() => Promise<void>) | undefined;
  after(async () => {
    await serve?.stop('SIGKILL');
    await holding?.();
    await db?.close();
  });

  const start = async () => (serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_ADMIN_TOKEN: TOKEN, LICENSE_CLIENT_RATE_LIMIT: '0' }));
  const job = async (id: string) => (await api(serve!.url, 'GET', `/api/bulk/${id}`, { token: TOKEN })).body;
  const stored = async (id: string) => (await db.query('SELECT state, claimed_by, changed FROM bulk_jobs WHERE id = ?', [id]))[0]!;

  /** Holds the job where it is (see above) until released; `row` is the license PostgreSQL's lock is on. */
  async function hold(row: License): Promise<() => Promise<void>> {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let taken: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (taken = resolve));
    const transaction = db.transaction(async (tx) => {
      if (db.engine === 'postgres') await tx.query('SELECT id FROM licenses WHERE id = ? FOR UPDATE', [row.id]);
      taken();
      await gate;
    });
    await held;
    holding = async () => {
      holding = undefined;
      release();
      await transaction;
    };
    return holding;
  }

  /** PostgreSQL: a daemon's statement waits on the test's lock. */
  const waiting = async () => Number((await db.query("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"))[0]!.n) > 0;

  it('resume the job after a stop (SIGTERM: its batch commits, the job goes back to the queue) and after a kill (SIGKILL: its batch rolls back), acting on each license exactly once', async function () {
    this.timeout(240_000);
    const total = licenses.length;
    await start();
    const postgres = db.engine === 'postgres';
    let release = postgres ? await hold(licenses[Math.floor(total / 2)]!) : undefined;
    const started = await api(serve!.url, 'POST', '/api/bulk', { token: TOKEN, body: { target: 'licenses', action: 'extend', by: '30d', filter: {} } });
    assert.equal(started.status, 202, started.text);
    const id = started.body.id as string;
    assert.equal(started.body.total, total);

    let before;
    if (postgres) {
      await waitFor(waiting, Boolean, 'the batch to reach the locked license');
      before = await job(id);
    } else {
      before = await waitFor(() => job(id), (body) => body.done >= 20, 'the job to get going');
      // From here the daemon waits for SQLite's lock in its next batch, and answers nothing meanwhile.
      release = await hold(licenses[0]!);
    }
    assert.ok(before.state === 'running' && before.done < total, JSON.stringify(before));
    const stopping = serve!;
    const stopped = stopping.stop('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await release!();
    assert.equal((await stopped).code, 0, stopping.stderr());
    const paused = await stored(id);
    assert.equal(paused.state, 'queued', `a daemon stopping puts its job back in the queue; its log:\n${stopping.stdout().slice(-3000)}`);
    assert.equal(paused.claimed_by, null);
    assert.ok(Number(paused.changed) >= before.done && Number(paused.changed) < total, `the batch under way committed: ${JSON.stringify({ before, paused })}`);

    release = postgres ? await hold(licenses[Math.floor((total * 3) / 4)]!) : undefined;
    await start();
    if (postgres) await waitFor(waiting, Boolean, 'the batch to reach the locked license');
    else await waitFor(() => job(id), (body) => body.done > Number(paused.changed) + 20, 'the job to resume');
    const killedAt = await job(id);
    assert.ok(killedAt.done < total, JSON.stringify(killedAt));
    await serve!.stop('SIGKILL');
    await release?.();
    assert.equal((await stored(id)).state, 'running', 'a killed daemon leaves its claim');

    // The same host, the holder gone: the next daemon takes the job over at once, not after the lease.
    await start();
    const end = await waitFor(() => job(id), (body) => body.state === 'done', 'the job to finish', scaledMs(120_000));
    assert.deepEqual([end.total, end.done, end.changed, end.failed, end.resumed], [total, total, total, 0, 2]);

    const renewed = await db.query("SELECT entity_id, count(*) AS n FROM audit_log WHERE action = 'license.renewed' GROUP BY entity_id");
    assert.equal(renewed.length, total);
    assert.ok(renewed.every((row) => Number(row.n) === 1), 'one audit entry per license');
    const perLicense = new Map<string, number>();
    for (const row of await deliveries(db, 'license.renewed')) perLicense.set(row.data.license_id, (perLicense.get(row.data.license_id) ?? 0) + 1);
    assert.equal(perLicense.size, total);
    assert.ok([...perLicense.values()].every((n) => n === 1), 'one event per license');
    const ends = new Map((await db.query('SELECT id, valid_until FROM licenses')).map((row) => [String(row.id), new Date(row.valid_until as string).getTime()]));
    for (const license of licenses) assert.equal(ends.get(license.id), Date.parse(license.valid_until) + 30 * DAY, license.id);
  });
});
