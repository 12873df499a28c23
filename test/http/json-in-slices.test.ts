import assert from 'node:assert/strict';
import type { Readable } from 'node:stream';
import { jsonInSlices } from '../../src/http/json-in-slices.js';

/** A big list reply goes out in slices (http/json-in-slices.ts), byte for byte what JSON.stringify gives. */
describe('JSON replies in slices', () => {
  it('sends the bytes JSON.stringify gives, with the length it announces and the headers it was given', async () => {
    const items = Array.from({ length: 1001 }, (_, i) => (i % 7 === 3 ? undefined : i % 5 === 0 ? null : { i, name: `Ünïcødé 🎉 ${i}`, nested: { at: new Date(i * 1000), list: [1, 'x', undefined] } }));
    const reply = await jsonInSlices({ status: 200, json: items, headers: { Link: '<next>; rel="next"' } } as never);
    assert.ok('stream' in reply);
    const chunks: Buffer[] = [];
    for await (const chunk of reply.stream as Readable) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    assert.equal(body.toString('utf8'), JSON.stringify(items));
    assert.equal(reply.size, body.length);
    assert.equal(reply.contentType, 'application/json; charset=utf-8');
    assert.deepEqual(reply.headers, { Link: '<next>; rel="next"' });
  });

  it('leaves small arrays and other replies as they are', async () => {
    for (const reply of [{ json: [1, 2, 3] }, { json: { a: 1 } }, { raw: 'x', contentType: 'text/plain' }]) assert.equal(await jsonInSlices(reply), reply);
  });
});
