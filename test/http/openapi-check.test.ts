import assert from 'node:assert/strict';
import { checkAnswer, exampleMismatches, OpenApiMismatch, type Answer } from '../support/openapi-check.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/** The check of every answer against docs/openapi.json (test/support/openapi-check.ts) can fail. */
describe('the suite\'s check of answers against docs/openapi.json', () => {
  const answer = (fields: Partial<Answer> & { headers?: Record<string, string> }): Answer => {
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'r1', ...fields.headers };
    return { method: 'GET', path: '/healthz', status: 200, text: '{"status":"ok"}', header: (name) => headers[name.toLowerCase()], ...fields };
  };

  it('passes a documented answer', () => {
    checkAnswer(answer({}));
    checkAnswer(answer({ path: '/api/nothing-here', status: 404, text: '{"error":{"code":"ROUTE_NOT_FOUND","message":"no such route","request_id":"r1"}}' }));
  });

  it('fails an undocumented status', () => {
    assert.throws(() => checkAnswer(answer({ status: 201 })), (error: Error) => error instanceof OpenApiMismatch && /GET \/healthz -> 201.*status 201 is not documented/.test(error.message));
  });

  it('fails a body of the wrong type, and one with an undocumented field', () => {
    assert.throws(() => checkAnswer(answer({ text: '{"status":1}' })), /does not match its schema.*must be string/s);
    assert.throws(() => checkAnswer(answer({ text: '{"status":"ok","extra":true}' })), /must NOT have additional properties/);
    assert.throws(() => checkAnswer(answer({ path: '/api/customers/x', status: 404, text: '{"error":{"code":"CUSTOMER_NOT_FOUND","request_id":"r1"}}' })), /must have required property 'message'/);
    assert.throws(() => checkAnswer(answer({ path: '/api/customers/x', status: 404, text: '{"error":{"code":"CUSTOMER_NOT_FOUND","message":"no customer"}}' })), /must have required property 'request_id'/);
  });

  it('fails an undocumented Content-Type, and an undocumented Link header', () => {
    assert.throws(() => checkAnswer(answer({ headers: { 'content-type': 'text/html' } })), /Content-Type text\/html is not documented/);
    assert.throws(() => checkAnswer(answer({ headers: { link: '</healthz?cursor=x>; rel="next"' } })), /headers not documented for this answer: link/);
  });

  it('fails an answer to a path no route serves with a status the router does not answer', () => {
    assert.throws(() => checkAnswer(answer({ path: '/nowhere', status: 200 })), /no operation serves this/);
  });

  it('finds the examples of the document (real answers, scripts/openapi/capture-examples.ts) valid against their schemas', () => {
    assert.deepEqual(exampleMismatches(), []);
  });

  describe('through fetch, against a real daemon', () => {
    let serve: ServeProcess;
    before(async () => {
      serve = await startServe({});
    });
    after(async () => {
      if (serve) await serve.stop();
    });

    it('checks what fetch gets: GET /api/openapi.json is the committed document and passes', async () => {
      const got = await api(serve.url, 'GET', '/api/openapi.json');
      assert.equal(got.status, 200);
      assert.equal(got.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.equal(got.body.openapi, '3.1.0');
    });

    it('passes the router\'s own answers through fetch, and fails a real answer under an operation that does not document its status', async () => {
      // 405: no operation owns it, the router answers it with the error body and Allow.
      assert.equal((await api(serve.url, 'PATCH', '/healthz', { body: {} })).status, 405);
      // 401 is documented for an admin route...
      const real = await fetch(`${serve.url}/api/customers`);
      assert.equal(real.status, 401);
      // ...but not for the public /healthz: the same answer, said to come from there, fails.
      const text = await real.text();
      assert.throws(() => checkAnswer({ method: 'GET', path: '/healthz', status: real.status, header: (name) => real.headers.get(name) ?? undefined, text }), /status 401 is not documented/);
    });
  });
});
