import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { rawConnection, requestLog } from '../support/raw-socket.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';
import { prng } from '../support/prng.js';

/** One request as it goes on the wire, with an X-Request-Id to find it in the log. */
function wire(method: string, route: string, id: string, headers: Record<string, string> = {}): string {
  const lines = [`${method} ${route} HTTP/1.1`, 'Host: x', `X-Request-Id: ${id}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
  if (method === 'POST') lines.push('Content-Length: 0');
  return `${lines.join('\r\n')}\r\n\r\n`;
}

describe('pipelined requests on connections that die', function () {
  this.timeout(120_000);
  const dirs: string[] = [];
  let serve: ServeProcess | undefined;
  const start = async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'license-pipeline-'));
    dirs.push(dir);
    serve = await startServe({ LICENSE_DATABASE_URL: path.join(dir, 'data', 'db.sqlite'), LICENSE_BACKUP_PATH: path.join(dir, 'backups'), LICENSE_CLIENT_RATE_LIMIT: '0' });
    return serve;
  };
  afterEach(async () => {
    await serve?.stop('SIGKILL');
    serve = undefined;
  });
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('are each logged once, as aborted without a status, and leave nothing in flight: a restore runs at once and SIGTERM drains', async () => {
    const daemon = await start();
    const token = daemon.token!;
    const backup = (await api(daemon.url, 'POST', '/api/backups', { token })).body;
    assert.ok(backup.backup_id);

    // Two pipelined requests and garbage in one write: Node refuses the garbage and drops the connection.
    const garbage = await rawConnection(daemon.url);
    garbage.socket.write(`${wire('GET', '/healthz', 'garbage-1')}${wire('GET', '/healthz', 'garbage-2')}THIS IS NOT HTTP\r\n\r\n`);
    await garbage.ended;

    // A slow request with two queued behind it, then a reset.
    const reset = await rawConnection(daemon.url);
    const auth = { Authorization: `Bearer ${token}` };
    reset.socket.write(`${wire('POST', `/api/backups/${backup.backup_id}/validate`, 'reset-0', auth)}${wire('GET', '/healthz', 'reset-1')}${wire('GET', '/readyz', 'reset-2')}`);
    reset.socket.resetAndDestroy();
    await reset.ended;

    const restore = await api(daemon.url, 'POST', `/api/backups/${backup.backup_id}/restore`, { token, body: { confirm: backup.backup_id } });
    assert.equal(restore.status, 200, restore.text);

    const stopped = await daemon.stop('SIGTERM');
    assert.equal(stopped.code, 0);
    assert.match(daemon.stderr(), /"msg":"drained"/, 'no request was left in flight at shutdown');
    assert.doesNotMatch(daemon.stderr(), /"msg":"grace period over"/);

    const log = requestLog(daemon.stderr());
    for (const id of ['garbage-1', 'garbage-2', 'reset-0', 'reset-1', 'reset-2']) {
      const lines = log.filter((line) => line.request_id === id);
      assert.equal(lines.length, 1, `${id} is logged exactly once: ${JSON.stringify(lines)}`);
      if (id !== 'reset-0') {
        assert.equal(lines[0]!.aborted, true, `${id}: ${JSON.stringify(lines[0])}`);
        assert.equal(lines[0]!.status, null, `${id} got no answer, so it has no status: ${JSON.stringify(lines[0])}`);
      }
    }
    for (const line of log) {
      if (line.aborted) assert.equal(line.status, null, JSON.stringify(line));
      else assert.equal(typeof line.status, 'number', JSON.stringify(line));
    }
  });

  it('logs every request exactly once under 200 connections x 20 pipelined with random garbage and resets', async () => {
    const daemon = await start();
    const seed = Number(process.env.PIPELINE_SEED ?? Date.now() % 1_000_000);
    const random = prng(seed);
    const CONNECTIONS = 200;
    const PIPELINED = 20;
    const answered = new Map<string, number>();
    const sent: string[] = [];
    const converse = async (connection: number) => {
      const mode = (['complete', 'garbage', 'reset'] as const)[Math.floor(random() * 3)]!;
      const resetAfter = 1 + Math.floor(random() * (PIPELINED - 1));
      const ids = Array.from({ length: PIPELINED }, (_, i) => `s${connection}-${i}`);
      const raw = await rawConnection(daemon.url);
      sent.push(...ids);
      raw.socket.write(ids.map((id, i) => wire('GET', i % 2 ? '/readyz' : '/healthz', id)).join('') + (mode === 'garbage' ? 'GARBAGE\r\n\r\n' : ''));
      if (mode === 'complete') {
        await raw.waitForResponses(PIPELINED);
        raw.socket.end();
      } else if (mode === 'reset') {
        // At least one answer came back, so the server has read the whole write.
        await raw.waitForResponses(resetAfter);
        raw.socket.resetAndDestroy();
      }
      await raw.ended;
      // Responses come back in order; the X-Request-Id of each says whose it is.
      for (const match of raw.received().matchAll(/HTTP\/1\.1 (\d{3}) [^]*?X-Request-Id: (\S+)/gi)) answered.set(match[2]!, Number(match[1]));
      if (mode === 'complete') assert.equal(raw.responses(), PIPELINED, `connection ${connection} got every answer`);
    };
    for (let batch = 0; batch < CONNECTIONS; batch += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, i) => converse(batch + i)));
    }
    assert.equal((await api(daemon.url, 'GET', '/healthz')).status, 200);
    const stopped = await daemon.stop('SIGTERM');
    assert.equal(stopped.code, 0);

    const logged = new Map<string, Record<string, any>[]>();
    for (const line of requestLog(daemon.stderr())) {
      if (!/^s\d+-\d+$/.test(line.request_id)) continue;
      logged.set(line.request_id, [...(logged.get(line.request_id) ?? []), line]);
    }
    assert.equal(sent.length, CONNECTIONS * PIPELINED);
    const missing = sent.filter((id) => !logged.has(id));
    assert.equal(missing.length, 0, `${missing.length} of ${sent.length} requests are not in the log, e.g. ${missing.slice(0, 3).join(', ')} (seed ${seed})`);
    assert.equal(logged.size, sent.length);
    for (const [id, lines] of logged) {
      assert.equal(lines.length, 1, `${id} logged ${lines.length} times (seed ${seed})`);
      const [line] = lines;
      if (answered.has(id)) assert.equal(line!.status, answered.get(id), `${id}: the logged status is the one the client got`);
      if (line!.aborted) assert.equal(line!.status, null, `${id} aborted but logged with a status: ${JSON.stringify(line)}`);
      else assert.ok(line!.status === 200, `${id}: ${JSON.stringify(line)}`);
    }
    assert.match(daemon.stderr(), /"msg":"drained"/, `nothing left in flight (seed ${seed})`);
  });
});
