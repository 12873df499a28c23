import assert from 'node:assert/strict';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/** Cursor paging as clients see it: the Link header of the API, --cursor on the command line. */
forEachEngine('list paging by cursor (HTTP and CLI)', (fixture) => {
  let serve: ServeProcess;
  let databaseUrl: string;
  const get = (route: string) => api(serve.url, 'GET', route, { token: serve.token! });
  const cli = (args: string[]) => runCli(args, { env: { LICENSE_DATABASE_URL: databaseUrl } });
  const customerIds: string[] = [];
  let order: string[];

  before(async () => {
    databaseUrl = await fixture.freshUrl();
    serve = await startServe({ LICENSE_DATABASE_URL: databaseUrl });
    for (let i = 0; i < 7; i += 1) {
      const { body } = await api(serve.url, 'POST', '/api/customers', { token: serve.token!, body: { name: `Customer ${i}` } });
      customerIds.push(body.id);
    }
    await api(serve.url, 'POST', `/api/customers/${customerIds[2]}/deactivate`, { token: serve.token!, body: {} });
    // The list's own order: customers made in the same millisecond are in id order.
    order = (await get('/api/customers')).body.map((c: { id: string }) => c.id);
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
  });

  /** Follows rel="next" from `route`; returns the rows and the Link headers seen. */
  async function follow(route: string): Promise<{ rows: any[]; links: string[] }> {
    const rows: any[] = [];
    const links: string[] = [];
    for (let next: string | undefined = route; next !== undefined;) {
      const answer = await get(next);
      assert.equal(answer.status, 200, answer.text);
      assert.ok(Array.isArray(answer.body), 'a list body stays a JSON array');
      rows.push(...answer.body);
      const link = answer.headers.get('link');
      next = undefined;
      if (link !== null) {
        links.push(link);
        const match = /^<([^>]+)>; rel="next"$/.exec(link);
        assert.ok(match, link);
        next = match[1];
      }
    }
    return { rows, links };
  }

  it('announces each next page in a Link header with the same filters and limit, until the last', async () => {
    assert.deepEqual([...order].sort(), [...customerIds].sort());
    const walked = await follow('/api/customers?limit=2');
    assert.deepEqual(walked.rows.map((c) => c.id), order);
    assert.equal(walked.links.length, 3);
    for (const link of walked.links) assert.match(link, /^<\/api\/customers\?limit=2&cursor=[A-Za-z0-9_-]+>; rel="next"$/);

    const active = await follow('/api/customers?active=true&limit=3');
    assert.deepEqual(active.rows.map((c) => c.id), order.filter((id) => id !== customerIds[2]));
    assert.ok(active.links.every((link) => link.startsWith('</api/customers?active=true&limit=3&cursor=')), active.links.join());

    // Newest first, by the same header; an offset page announces the cursor page after it.
    const audit = await follow('/api/audit?entity_type=customer&limit=3');
    assert.equal(audit.rows.length, 8);
    assert.deepEqual(audit.rows.map((e) => e.id), [...audit.rows.map((e) => e.id)].sort((a, b) => b - a));
    const offsetPage = await get('/api/customers?limit=2&offset=4');
    assert.match(offsetPage.headers.get('link')!, /^<\/api\/customers\?limit=2&cursor=/);
    assert.equal((await get('/api/customers?limit=7')).headers.get('link'), null, 'no Link on the last page');
  });

  it('refuses a bad cursor, a cursor of another list or filters, an offset past the cap, and cursor with offset', async () => {
    const cursor = new URL(`http://x${/^<([^>]+)>/.exec((await get('/api/customers?limit=1')).headers.get('link')!)![1]}`).searchParams.get('cursor')!;
    const refused = async (route: string, pattern: RegExp) => {
      const answer = await get(route);
      assert.equal(answer.status, 400, answer.text);
      assert.equal(answer.body.error.code, 'INVALID_INPUT');
      assert.match(answer.body.error.message, pattern);
      return answer;
    };
    await refused(`/api/licenses?cursor=${cursor}`, /belongs to another list/);
    await refused(`/api/customers?active=false&cursor=${cursor}`, /other filters/);
    const bad = await refused('/api/customers?cursor=AAAAbbbbCCCCddddEEEEffff', /is not a cursor this server made/);
    assert.ok(!bad.text.includes('AAAAbbbbCCCCddddEEEEffff'));
    await refused('/api/customers?offset=10001', /offset may be at most 10000/);
    await refused(`/api/customers?offset=1&cursor=${cursor}`, /not both/);
    await refused('/api/machines?limit=10001', /limit must be/);
    // The daemon's pages stop at 1000 rows (the command line's at 10000): a bigger page
    // would hold up the thread that answers validations.
    await refused('/api/licenses?limit=1001', /limit must be an integer from 1 to 1000/);
    assert.equal((await get('/api/licenses?limit=1000')).status, 200);
  });

  it('pages on the command line with --cursor, the next cursor on standard error', async () => {
    const first = ok(await cli(['customer', 'list', '--limit', '3', '--json']));
    assert.deepEqual(first.json().map((c: { id: string }) => c.id), order.slice(0, 3));
    const line = /^next page: --cursor ([A-Za-z0-9_-]+)$/m.exec(first.stderr);
    assert.ok(line, first.stderr);
    const second = ok(await cli(['customer', 'list', '--limit', '3', '--cursor', line[1]!]));
    assert.match(second.stdout, new RegExp(order[3]!));
    assert.doesNotMatch(second.stdout, new RegExp(order[2]!));
    const next = /^next page: --cursor ([A-Za-z0-9_-]+)$/m.exec(second.stderr)![1]!;
    const last = ok(await cli(['customer', 'list', '--limit', '3', '--cursor', next, '--json']));
    assert.deepEqual(last.json().map((c: { id: string }) => c.id), order.slice(6));
    assert.doesNotMatch(last.stderr, /next page/);

    const otherList = await cli(['license', 'list', '--cursor', next, '--json']);
    assert.equal(otherList.code, 2, otherList.stderr);
    assert.equal(otherList.json().error.code, 'INVALID_INPUT');
    const both = await cli(['customer', 'list', '--cursor', next, '--offset', '1']);
    assert.notEqual(both.code, 0);
    assert.match(both.stderr, /cursor|offset/);
  });
});
