import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { postJson, MAX_ANSWER_BYTES } from '../../src/client/transport.js';
import { LicenseFixture } from '../support/license-fixture.js';

/** A real HTTP server on loopback answering every request with `handler`. */
async function answering(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ addr: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    addr: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const deadlines = { connectTimeout: 2_000, requestTimeout: 5_000 };

/** One postJson to `server`, which is closed afterwards whatever happened. */
async function askOnce(server: { addr: string; close(): Promise<void> }) {
  try {
    return await postJson(`http://${server.addr}/`, {}, deadlines);
  } finally {
    await server.close();
  }
}
const TOO_LARGE = { kind: 'unreachable', reason: 'the answer is larger than 1 MiB (HTTP 200)' };

describe('what the client makes of answers that are not the API\'s', function () {
  this.timeout(60_000);

  describe('postJson', () => {
    it('takes HTML, a 500 and a 502 with an HTML body as unreachable, saying which', async () => {
      const cases: Array<[number, string, string, RegExp]> = [
        [200, 'text/html', '<html><body>Welcome to nginx!</body></html>', /not JSON \(HTTP 200\)/],
        [500, 'application/json', '{"error":{"code":"INTERNAL","message":"boom"}}', /the server failed \(HTTP 500\)/],
        [502, 'text/html', '<html>Bad Gateway</html>', /the server failed \(HTTP 502\)/],
        [200, 'application/json', '[1,2,3]', /JSON that is not an object/],
      ];
      for (const [status, type, body, reason] of cases) {
        const server = await answering((_, res) => res.writeHead(status, { 'content-type': type }).end(body));
        try {
          const reply = await postJson(`http://${server.addr}/api/v1/validate`, {}, deadlines);
          assert.equal(reply.kind, 'unreachable', `${status} ${body}`);
          assert.match((reply as { reason: string }).reason, reason);
        } finally {
          await server.close();
        }
      }
    });

    it('refuses a body over 1 MiB by its declared length before reading it', async () => {
      let sent = 0;
      const server = await answering((_, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(64 * MAX_ANSWER_BYTES) });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        const pump = () => {
          while (!res.destroyed && sent < 64 * MAX_ANSWER_BYTES && res.write(chunk)) sent += chunk.length;
          if (!res.destroyed && sent < 64 * MAX_ANSWER_BYTES) res.once('drain', () => ((sent += chunk.length), pump()));
        };
        pump();
      });
      assert.deepEqual(await askOnce(server), TOO_LARGE);
      assert.ok(sent < 16 * MAX_ANSWER_BYTES, `the client hung up early (${sent} bytes sent of 64 MiB)`);
    });

    it('refuses a chunked body once it passes 1 MiB, without reading the rest', async () => {
      let sent = 0;
      let closed = false;
      const server = await answering((_, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.on('close', () => (closed = true));
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        res.write('{"valid": true, "padding": "');
        const pump = () => {
          while (!closed && sent < 256 * MAX_ANSWER_BYTES && res.write(chunk)) sent += chunk.length;
          if (!closed && sent < 256 * MAX_ANSWER_BYTES) res.once('drain', () => ((sent += chunk.length), pump()));
        };
        pump();
      });
      assert.deepEqual(await askOnce(server), TOO_LARGE);
      assert.ok(sent < 32 * MAX_ANSWER_BYTES, `the client hung up early (${sent} bytes sent)`);
    });

    it('accepts an answer of exactly 1 MiB', async () => {
      const body = `{"valid":false,"pad":"${' '.repeat(MAX_ANSWER_BYTES - 24)}"}`;
      assert.equal(Buffer.byteLength(body), MAX_ANSWER_BYTES);
      const server = await answering((_, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
      assert.equal((await askOnce(server)).kind, 'answer');
    });

    it('takes a body cut off mid-way as unreachable', async () => {
      const server = await answering((_, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"valid": tr');
        setTimeout(() => res.socket?.destroy(), 50);
      });
      assert.deepEqual(await askOnce(server), { kind: 'unreachable', reason: 'the answer was cut off' });
    });
  });

  describe('the client', () => {
    let fixture: LicenseFixture;
    before(async () => {
      fixture = await LicenseFixture.start();
    });
    afterEach(() => fixture.closeClients());
    after(() => fixture?.cleanup());

    it('answers from the .lic file when the server sends HTML, a 500 or 2 MiB, and online again when it is itself', async () => {
      const answers: Array<(res: ServerResponse) => void> = [
        (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Captive portal</title>'),
        (res) => res.writeHead(500).end('Internal Server Error'),
        (res) => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"valid":true,"pad":"${'x'.repeat(2 * MAX_ANSWER_BYTES)}"}`),
      ];
      let next = 0;
      const server = await answering((_, res) => answers[next++]!(res));
      try {
        const c = fixture.client({ serverAddr: server.addr, offline: { retryInterval: 60_000, maxRetryInterval: 60_000 } });
        for (const what of ['HTML', '500', '2 MiB']) {
          const result = await c.validate();
          assert.equal(result.valid, true, `${what}: ${JSON.stringify(result.failures)}`);
          assert.equal(result.source, 'license-file', what);
        }
        assert.equal(next, 3, 'each validate() asked the server: these failures are quick, not timeouts');
      } finally {
        await server.close();
      }
      assert.equal((await fixture.client().validate()).source, 'online');
    });
  });
});
