import assert from 'node:assert/strict';
import type { Readable } from 'node:stream';
import { listReply } from '../../src/http/list-reply.js';
import { parseCsv } from '../../src/lib/csv.js';
import type { ListPage, Page } from '../../src/lib/paging.js';

/** A list of `total` customers-shaped rows, paged by a cursor that is the next row's index. */
function fakeList(total: number, failAt?: number) {
  const reads: Array<Page> = [];
  const fetchPage = async (page: Page): Promise<ListPage<Record<string, unknown>>> => {
    reads.push(page);
    const start = page.cursor === undefined ? (page.offset ?? 0) : Number(page.cursor);
    if (failAt !== undefined && start >= failAt) throw new Error('the database went away');
    const end = Math.min(total, start + page.limit!);
    const items = Array.from({ length: end - start }, (_, i) => ({
      id: `c-${start + i}`, name: `Customer ${start + i} ${'x'.repeat(2_000)}`, active: true, email: null, created_at: '2027-01-01T00:00:00.000Z', updated_at: '2027-01-01T00:00:00.000Z',
    }));
    return { items, next_cursor: end < total ? String(end) : null };
  };
  return { reads, fetchPage };
}

const request = (query: string, turns: { count: number }) => ({
  query: new URLSearchParams(query),
  accept: '',
  turn: async <T>(work: () => Promise<T>) => {
    turns.count += 1;
    return work();
  },
});

async function readAll(stream: Readable): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += (chunk as Buffer).toString('utf8');
  return text;
}

describe('listReply: a list as JSON pages or as one streamed CSV', () => {
  it('reads a CSV export page by page as the client takes it, each later page in the admin reads\' turn', async () => {
    const list = fakeList(500);
    const turns = { count: 0 };
    const reply = await listReply(request('format=csv&limit=10', turns), 'customers', '/api/customers', list.fetchPage);
    assert.ok('stream' in reply && reply.size === undefined, 'streamed, without a Content-Length');
    // The handler read the first page only; nothing more is read until the client asks.
    assert.equal(list.reads.length, 1);
    const stream = reply.stream;
    const first = await new Promise<Buffer>((resolve) => stream.once('data', resolve));
    stream.pause();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(list.reads.length <= 3, `${list.reads.length} of 50 pages read while the client held back after the first chunk`);
    stream.resume();
    const text = first.toString('utf8') + (await readAll(stream));
    const records = parseCsv(text);
    assert.deepEqual(records[0]!.fields, ['id', 'name', 'active', 'email', 'created_at', 'updated_at']);
    assert.deepEqual(records.slice(1).map((record) => record.fields[0]), Array.from({ length: 500 }, (_, i) => `c-${i}`));
    assert.equal(list.reads.length, 50);
    assert.equal(turns.count, 49);
    assert.deepEqual(list.reads.slice(0, 3), [{ limit: 10 }, { limit: 10, cursor: '10' }, { limit: 10, cursor: '20' }]);
  });

  it('starts at the request\'s cursor or offset and reads 1,000 rows a step when no limit is given', async () => {
    const list = fakeList(2_500);
    const reply = await listReply(request('format=csv&offset=400', { count: 0 }), 'customers', '/api/customers', list.fetchPage);
    assert.ok('stream' in reply);
    assert.equal(parseCsv(await readAll(reply.stream)).length, 1 + 2_100);
    assert.deepEqual(list.reads, [{ limit: 1_000, offset: 400 }, { limit: 1_000, cursor: '1400' }, { limit: 1_000, cursor: '2400' }]);
  });

  it('fails the stream, never ends it, when a later page cannot be read: the client sees an incomplete answer', async () => {
    const list = fakeList(100, 30);
    const reply = await listReply(request('format=csv&limit=10', { count: 0 }), 'customers', '/api/customers', list.fetchPage);
    assert.ok('stream' in reply);
    await assert.rejects(readAll(reply.stream), /the database went away/);
  });

  it('refuses a row member that has no column instead of dropping it from the file', async () => {
    const fetchPage = async () => ({ items: [{ id: 'x', name: 'n', active: true, email: null, created_at: 't', updated_at: 't', status: 'active' }], next_cursor: null });
    await assert.rejects(listReply(request('format=csv', { count: 0 }), 'customers', '/api/customers', fetchPage), /lack "status"/);
  });

  it('answers one JSON page with the view applied, as pageReply did', async () => {
    const list = fakeList(25);
    const reply = await listReply(request('limit=10', { count: 0 }), 'customers', '/api/customers', list.fetchPage, { row: ({ name: _name, ...rest }) => rest });
    assert.ok('json' in reply);
    assert.equal((reply.json as unknown[]).length, 10);
    assert.equal('name' in (reply.json as Array<Record<string, unknown>>)[0]!, false);
    assert.equal(reply.headers?.Link, '</api/customers?limit=10&cursor=10>; rel="next"');
  });
});
