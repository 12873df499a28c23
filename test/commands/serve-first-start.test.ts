import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe } from '../support/serve.js';

/** A port some other program listens on, as an operator's first start often meets. */
async function takenPort(servers: Server[]): Promise<number> {
  const server = createServer((socket) => socket.destroy());
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

forEachEngine('a first serve that cannot listen', ({ freshUrl }) => {
  const servers: Server[] = [];
  after(() => servers.forEach((server) => server.close()));

  for (const [which, occupy] of [
    ['the API port', (port: number) => ({ args: ['--port', String(port)], env: {} })],
    ['the metrics port', (port: number) => ({ args: ['--port', '0'], env: { LICENSE_METRICS_PORT: String(port) } })],
  ] as const) {
    it(`(${which} taken) leaves no admin token behind: the next start that listens creates and prints the bootstrap token`, async () => {
      const url = await freshUrl();
      const { args, env } = occupy(await takenPort(servers));
      const failed = await runCli(['serve', ...args], { env: { LICENSE_DATABASE_URL: url, ...env } });
      assert.equal(failed.code, 7, failed.stderr);
      assert.match(failed.stderr, /LISTEN_FAILED/);
      assert.doesNotMatch(failed.stdout + failed.stderr, /lsat_/, 'no token is shown by a start that failed');

      const tokens = await runCli(['token', 'list', '--json'], { env: { LICENSE_DATABASE_URL: url } });
      assert.equal(tokens.code, 0, tokens.stderr);
      assert.deepEqual(tokens.json(), [], 'the failed start created no token');

      const serve = await startServe({ LICENSE_DATABASE_URL: url });
      try {
        assert.match(serve.token ?? serve.stdout(), /^lsat_/, 'the first start that listens shows the bootstrap token');
        assert.equal((await api(serve.url, 'GET', '/api/signing-key', { token: serve.token })).status, 200);
      } finally {
        await serve.stop();
      }
    });
  }
});
