import assert from 'node:assert/strict';
import { ADMIN_URL, usePostgresDatabase } from '../support/postgres.js';
import { startServe, type ServeProcess } from '../support/serve.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { assertSurvived, eventuallyTrue, servesAgain, startUsageLoad, stderrTail, UNAVAILABLE, usageLicense } from '../support/usage-load.js';

const TOKEN = 'postgres-network-admin-token-0123456789';

/**
 * Issue 23, items 0 and 0b: a PostgreSQL daemon behind a network that fails, made by a TCP
 * proxy between it and the shared server (its own database only). A reset of every
 * connection must not kill it (item 0); a database that stops answering while the
 * connections stay open must not stall it (item 0b): before the fix there was no statement,
 * query or lock check timeout, requests in flight hung for the whole outage, /readyz hung,
 * and the lock connection noticed nothing.
 */
describe('a PostgreSQL daemon behind a network that fails', function () {
  this.timeout(60_000);
  const database = usePostgresDatabase();
  let proxy: TcpProxy | undefined;
  let serve: ServeProcess | undefined;
  afterEach(async () => {
    await serve?.stop();
    await proxy?.close();
    serve = undefined;
    proxy = undefined;
  });

  /** A daemon whose database connections all go through a proxy the test controls. */
  async function serveBehindProxy(env: Record<string, string> = {}): Promise<{ serve: ServeProcess; proxy: TcpProxy }> {
    const shared = new URL(ADMIN_URL);
    proxy = await startTcpProxy(`${shared.hostname}:${shared.port || 5432}`);
    const url = new URL(database());
    url.host = proxy.addr;
    serve = await startServe({ LICENSE_DATABASE_URL: url.toString(), LICENSE_ADMIN_TOKEN: TOKEN, LICENSE_CLIENT_RATE_LIMIT: '0', ...env });
    return { serve, proxy };
  }

  it('stays up when every database connection is reset under load, answers 503 DATABASE_UNAVAILABLE meanwhile, serves again and keeps every acknowledged write', async () => {
    const { serve, proxy } = await serveBehindProxy();
    const load = startUsageLoad([serve.url], await usageLicense(serve.url, TOKEN), 50);
    try {
      await eventuallyTrue(() => load.acknowledged().length >= 200, 20_000, 'the load to be under way');
      for (let fault = 0; fault < 3; fault += 1) {
        const answered = load.exchanges.length;
        proxy.reset();
        await eventuallyTrue(() => load.exchanges.length >= answered + 50 || serve.child.exitCode !== null, 10_000, 'answers after the reset');
      }
      await servesAgain([serve], load);
    } finally {
      await load.stop();
    }
    await assertSurvived(database(), [serve], load);
  });

  it('a database that stops answering with its connections open: requests in flight and /readyz answer 503 DATABASE_UNAVAILABLE while it is silent, the lock connection notices, and the daemon serves again once it answers', async () => {
    // Short timeouts, so that the silence outlasts them in a few seconds.
    const { serve, proxy } = await serveBehindProxy({ LICENSE_DATABASE_CONNECT_TIMEOUT: '3', LICENSE_DATABASE_STATEMENT_TIMEOUT: '2', LICENSE_DATABASE_QUERY_TIMEOUT: '4' });
    // Fewer clients than the pool's 10 connections: a request in flight is one whose statement went unanswered.
    const load = startUsageLoad([serve.url], await usageLicense(serve.url, TOKEN), 8);
    let silentFrom = 0;
    let silentUntil = 0;
    let readyz: { status: number; code: string | undefined; answeredAt: number; ms: number } | undefined;
    let caught: Array<{ key: string; sent: number }> = [];
    try {
      await eventuallyTrue(() => load.acknowledged().length >= 100, 20_000, 'the load to be under way');
      proxy.stall();
      silentFrom = load.now();
      // Any request still in flight half a second into the silence waits for the database.
      await new Promise((resolve) => setTimeout(resolve, 500));
      caught = load.inFlight();
      assert.ok(caught.length >= 4, `requests were caught by the silence: ${caught.length}`);
      const asked = Date.now();
      // A cap far beyond the second /readyz has, only so that a hanging probe fails the test rather than the run.
      const answer = await fetch(`${serve.url}/readyz`, { signal: AbortSignal.timeout(15_000) });
      readyz = { status: answer.status, code: ((await answer.json()) as { error?: { code?: string } }).error?.code, answeredAt: load.now(), ms: Date.now() - asked };
      await eventuallyTrue(() => /lost the database lock/.test(serve.stderr()), 20_000, 'the daemon to notice that its lock connection no longer answers');
      const answeredKeys = () => new Set(load.exchanges.map((exchange) => exchange.key));
      await eventuallyTrue(() => caught.every(({ key }) => answeredKeys().has(key)), 20_000, 'the requests in flight when the database went silent to be answered');
      // Fenced: what comes now is refused at once, and what came before it is answered too.
      const fenced = load.now();
      await eventuallyTrue(
        () => load.inFlight().every(({ sent }) => sent > fenced) && load.exchanges.filter(({ sent }) => sent > fenced).length >= 10,
        20_000,
        'every request to be answered while the database is silent',
      );
      silentUntil = load.now();
      proxy.resume();
      await servesAgain([serve], load);
      assert.match(serve.stderr(), /holding the database lock again; serving/);
    } finally {
      proxy.resume();
      await load.stop();
    }
    const during = load.exchanges.filter((exchange) => exchange.answered > silentFrom && exchange.answered < silentUntil && exchange.sent > silentFrom);
    assert.ok(during.length > 0, 'requests were answered while the database was silent');
    assert.deepEqual([...new Set(during.map((exchange) => exchange.outcome))], [UNAVAILABLE], 'what the requests sent during the silence got');
    const caughtOutcomes = caught.map(({ key }) => load.exchanges.find((exchange) => exchange.key === key)!.outcome);
    assert.deepEqual([...new Set(caughtOutcomes)], [UNAVAILABLE], 'what the requests in flight when the database went silent got');
    assert.ok(readyz, '/readyz answered');
    assert.deepEqual([readyz.status, readyz.code], [503, 'DATABASE_UNAVAILABLE'], '/readyz while the database is silent');
    // It did not wait for the database's timeouts: it answered before any request caught by the silence did.
    const firstCaughtAnswer = Math.min(...caught.map(({ key }) => load.exchanges.find((exchange) => exchange.key === key)!.answered));
    assert.ok(readyz.answeredAt < firstCaughtAnswer, `/readyz answered after ${readyz.ms} ms, after the requests that waited for the query timeout`);
    await assertSurvived(database(), [serve], load);
    assert.equal(serve.child.exitCode, null, stderrTail(serve));
  });
});
