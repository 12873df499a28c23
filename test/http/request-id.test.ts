import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from '../support/fake-clock.js';
import { firstBody, rawConnection, requestLog } from '../support/raw-socket.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * An operator given a user's error body must find its log line: every answer carries
 * X-Request-Id, every error body the same id as `error.request_id`, and the request's log line
 * the same id again (issue 27, item 4).
 */
describe('request ids', () => {
  let serve: ServeProcess;
  before(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'license-request-id-'));
    serve = await startServe({ LICENSE_DATABASE_URL: `sqlite://${path.join(dir, 'db.sqlite')}`, LICENSE_CLIENT_RATE_LIMIT: '0' });
  });
  after(async () => {
    await serve?.stop();
  });

  const loggedLine = async (id: string) => {
    await eventually(() => requestLog(serve.stderr()).some((line) => line.request_id === id), `the log line of ${id}`);
    return requestLog(serve.stderr()).filter((line) => line.request_id === id);
  };

  it('echoes a well-formed id in the header, the error body and the log line', async () => {
    const answer = await api(serve.url, 'GET', '/api/licenses', { headers: { 'x-request-id': 'support-ticket.4711' } });
    assert.equal(answer.status, 401);
    assert.equal(answer.headers.get('x-request-id'), 'support-ticket.4711');
    assert.deepEqual(answer.body, { error: { code: 'UNAUTHORIZED', message: 'an admin bearer token is required', request_id: 'support-ticket.4711' } });
    const lines = await loggedLine('support-ticket.4711');
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.status, 401);
    assert.equal(lines[0]!.route, 'GET /api/licenses');
  });

  it('makes a fresh id for one that is missing, too long or carries characters a log could misread', async () => {
    for (const given of [undefined, 'x'.repeat(65), 'two words', 'id";injected="1', '']) {
      const answer = await api(serve.url, 'GET', '/api/nothing-here', { headers: given === undefined ? {} : { 'x-request-id': given } });
      assert.equal(answer.status, 404);
      const id = answer.headers.get('x-request-id')!;
      assert.match(id, UUID, `for ${JSON.stringify(given)}`);
      assert.equal(answer.body.error.request_id, id);
      assert.equal((await loggedLine(id)).length, 1);
    }
    const first = await api(serve.url, 'GET', '/healthz');
    const second = await api(serve.url, 'GET', '/healthz');
    assert.notEqual(first.headers.get('x-request-id'), second.headers.get('x-request-id'), 'each request its own id');
    assert.match(first.headers.get('x-request-id')!, UUID, 'successful answers carry one too');
  });

  it('gives an id to a request Node refuses before the handler, in the answer and in a log line', async () => {
    const raw = await rawConnection(serve.url);
    raw.socket.write('NOT HTTP AT ALL\r\n\r\n');
    await raw.ended;
    const text = raw.received();
    assert.match(text, /^HTTP\/1\.1 400 /);
    const id = /X-Request-Id: (\S+)/i.exec(text)?.[1];
    assert.ok(id, text);
    assert.match(id, UUID);
    const body = firstBody(text);
    assert.equal(body.error.code, 'INVALID_INPUT');
    assert.equal(body.error.request_id, id);
    const [line] = await loggedLine(id);
    assert.equal(line!.status, 400);
    assert.equal(line!.route, 'unparsed');
  });

  it('keeps the id of a request whose body Node fails after dispatching it', async () => {
    const raw = await rawConnection(serve.url);
    // The headers are fine, so the handler has the request (and its id); the chunk is not.
    raw.socket.write('POST /api/v1/validate HTTP/1.1\r\nHost: x\r\nX-Request-Id: broken-chunk\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n');
    await raw.ended;
    const text = raw.received();
    assert.match(text, /^HTTP\/1\.1 400 /);
    assert.match(text, /X-Request-Id: broken-chunk/i);
    assert.equal(firstBody(text).error.request_id, 'broken-chunk');
    const lines = await loggedLine('broken-chunk');
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0]!.status, 400);
  });
});
