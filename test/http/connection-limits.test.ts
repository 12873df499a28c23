import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { addressKey } from '../../src/http/connection-limits.js';
import { busyFactor } from '../support/busy-machine.js';
import { eventually } from '../support/fake-clock.js';
import { startServe, type ServeProcess } from '../support/serve.js';

/** A connection the test opened and then left alone. */
interface Quiet {
  readonly socket: Socket;
  /** When it was open (with `tls: 'handshake'`, when its handshake was done). */
  readonly openedAt: number;
  /**
   * Just before it was asked for: the daemon's clock for it cannot start earlier. Its 'connect'
   * event reaches a loaded test process late (110 ms in a CI run at load 11), so openedAt can
   * be after the daemon started timing; a life measured from here is never too short.
   */
  readonly requestedAt: number;
  /** Resolves with the moment the server ended it (its FIN, or a reset). */
  readonly ended: Promise<number>;
  isEnded(): boolean;
  /** The application data it received, as text. */
  received(): string;
}

/**
 * Opens a connection that sends nothing and never closes its end, as a flood does: it does
 * not answer the server's FIN with its own, so the daemon keeps its descriptor for as long
 * as the daemon itself does not let it go. `localAddress`: any of 127/8 reaches a loopback
 * listener on Linux, so that one machine plays several clients.
 */
function openQuiet(url: string, options: { localAddress?: string; tls?: 'handshake' } = {}): Promise<Quiet> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let received = '';
    let endedAt: number | undefined;
    const where = { host: hostname, port: Number(port), allowHalfOpen: true, ...(options.localAddress ? { localAddress: options.localAddress } : {}) };
    const requestedAt = Date.now();
    const socket: Socket = options.tls ? tlsConnect({ ...where, rejectUnauthorized: false }) : connect(where);
    const ended = new Promise<number>((done) => {
      const end = () => done((endedAt ??= Date.now()));
      socket.once('end', end).once('close', end).on('error', end);
    });
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.once(options.tls ? 'secureConnect' : 'connect', () => {
      socket.off('error', reject);
      resolve({ socket, openedAt: Date.now(), requestedAt, ended, isEnded: () => endedAt !== undefined, received: () => received });
    });
    socket.once('error', reject);
  });
}

/** `GET /healthz` on a connection of its own from `localAddress`: the answer, or '' when the connection was closed unanswered. */
function healthzFrom(url: string, localAddress: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    let text = '';
    const socket = connect({ host: hostname, port: Number(port), localAddress }, () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    socket.setEncoding('latin1').on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => undefined);
    socket.once('close', () => resolve(text));
  });
}

/** The daemon's open descriptors (Linux). */
function descriptors(serve: ServeProcess): number {
  return readdirSync(`/proc/${serve.child.pid}/fd`).length;
}

/** Headers are due within min(10, server.request_timeout) seconds (docs/http-api.md, Conventions). */
const headersLimitMs = (requestTimeoutSeconds: number) => Math.min(10, requestTimeoutSeconds) * 1000;
/**
 * server.request_timeout for the tests of silent connections: 2 s, longer on a busy machine
 * (up to the 10 s cap of the headers limit), where opening 400 connections took longer than
 * 2 s and the first were answered 408 before the last had opened (CI, load 9 on 2 cores).
 */
const silenceLimitSeconds = () => Math.min(10, Math.max(2, Math.ceil(2 * busyFactor())));
/** How often the daemon looks for connections past their limit (the same page). */
const CHECK_INTERVAL_MS = 1000;

async function openMany(url: string, count: number, options: (i: number) => Parameters<typeof openQuiet>[1]): Promise<{ connections: Quiet[]; openingMs: number }> {
  const started = Date.now();
  const connections = await Promise.all(Array.from({ length: count }, (_, i) => openQuiet(url, options(i))));
  return { connections, openingMs: Date.now() - started };
}

/**
 * The daemon ended every connection no sooner than `limitMs` after it opened and no later
 * than `limitMs`, its checking interval and a slack measured on this machine (twice what
 * opening them all took, as a busy machine is slow at both, and at least a second); and it
 * let their descriptors go by then, although none of the clients closed its end.
 */
async function assertClosedAtLimit(serve: ServeProcess, baseline: number, opened: { connections: Quiet[]; openingMs: number }, limitMs: number, what: string): Promise<void> {
  const { connections } = opened;
  const allowedMs = limitMs + CHECK_INTERVAL_MS + Math.max(1000, 2 * opened.openingMs);
  const deadline = Math.max(...connections.map((c) => c.openedAt)) + allowedMs;
  let released = descriptors(serve) <= baseline + 2;
  while (!(released && connections.every((c) => c.isEnded())) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    released = descriptors(serve) <= baseline + 2;
  }
  const open = connections.filter((c) => !c.isEnded()).length;
  assert.equal(open, 0, `${what}: ${open} of ${connections.length} not ended ${allowedMs} ms after they opened (limit ${limitMs} ms)`);
  assert.ok(released, `${what}: the daemon holds ${descriptors(serve)} descriptors, ${baseline} before they opened, ${allowedMs} ms after (limit ${limitMs} ms)`);
  const lives = await Promise.all(connections.map(async (c) => (await c.ended) - c.requestedAt));
  assert.ok(Math.min(...lives) >= limitMs - 50, `${what}: one was ended after ${Math.min(...lives)} ms, before the ${limitMs} ms it is allowed`);
}

describe('connections the daemon holds', function () {
  // Each test waits out the headers limit of 2 s once or twice, on a machine that may be busy.
  this.timeout(120_000);
  const dirs: string[] = [];
  const env = (extra: Record<string, string> = {}) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'license-connections-'));
    dirs.push(dir);
    return { LICENSE_DATABASE_URL: path.join(dir, 'data', 'license-server.db'), ...extra };
  };
  const quiet: Quiet[] = [];
  afterEach(() => quiet.splice(0).forEach((c) => c.socket.destroy()));
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  before(function () {
    if (!existsSync('/proc/self/fd')) this.skip();
  });
  const keep = <T extends { connections: Quiet[] }>(opened: T): T => {
    quiet.push(...opened.connections);
    return opened;
  };

  it('answers connections that send nothing with 408 at the headers limit and lets their descriptors go, though the clients never close', async () => {
    const requestTimeout = silenceLimitSeconds();
    const serve = await startServe(env({ LICENSE_REQUEST_TIMEOUT: String(requestTimeout) }));
    try {
      const before = descriptors(serve);
      // 400 from 8 addresses: within the default limits, so that only the silence ends them.
      const opened = keep(await openMany(serve.url, 400, (i) => ({ localAddress: `127.0.1.${1 + (i % 8)}` })));
      let held = 0;
      while (held < 400 && !opened.connections.some((c) => c.isEnded())) {
        held = descriptors(serve) - before;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(held >= 400, `the daemon held ${held} descriptors for them while they were open`);
      await assertClosedAtLimit(serve, before, opened, headersLimitMs(requestTimeout), 'silent connections');
      for (const c of opened.connections) {
        assert.match(c.received(), /^HTTP\/1\.1 408 /);
        assert.equal(JSON.parse(c.received().slice(c.received().indexOf('\r\n\r\n') + 4)).error.code, 'REQUEST_TIMEOUT');
      }
      assert.match(await healthzFrom(serve.url, '127.0.0.1'), /^HTTP\/1\.1 200 /);
    } finally {
      await serve.stop();
    }
  });

  it('holds server.max_connections_per_address and server.max_connections: one more is closed at once, unanswered; one closing makes room', async () => {
    const serve = await startServe(env({ LICENSE_MAX_CONNECTIONS: '30', LICENSE_MAX_CONNECTIONS_PER_ADDRESS: '20' }));
    try {
      const admitted = keep(await openMany(serve.url, 20, () => ({ localAddress: '127.0.2.1' }))).connections;
      const overAddress = keep({ connections: [await openQuiet(serve.url, { localAddress: '127.0.2.1' })] }).connections[0]!;
      await overAddress.ended;
      assert.equal(overAddress.received(), '');
      assert.ok(admitted.every((c) => !c.isEnded()), 'the 21st from one address was closed while its 20 stayed open');

      admitted.push(...keep(await openMany(serve.url, 10, () => ({ localAddress: '127.0.2.2' }))).connections);
      const overTotal = keep({ connections: [await openQuiet(serve.url, { localAddress: '127.0.2.3' })] }).connections[0]!;
      await overTotal.ended;
      assert.equal(overTotal.received(), '');
      assert.equal(await healthzFrom(serve.url, '127.0.2.4'), '', 'a request on a 31st connection is not answered');
      assert.ok(admitted.every((c) => !c.isEnded()), 'the 31st was closed while the 30 stayed open');

      const answered = async (from: string) => {
        // The daemon sees the close a moment later; well within the headers limit that would end the others.
        const deadline = Date.now() + headersLimitMs(30) / 2;
        let answer = await healthzFrom(serve.url, from);
        while (!/^HTTP\/1\.1 200 /.test(answer) && Date.now() < deadline) answer = await healthzFrom(serve.url, from);
        return answer;
      };
      admitted.pop()!.socket.destroy();
      assert.match(await answered('127.0.2.4'), /^HTTP\/1\.1 200 /, 'a connection that closed makes room for another');
      admitted.shift()!.socket.destroy();
      assert.match(await answered('127.0.2.1'), /^HTTP\/1\.1 200 /, 'and room for its address');

      await eventually(() => (serve.stderr().match(/"msg":"connections refused"/g)?.length ?? 0) >= 2, 'both refusals are logged');
      const refusals = serve.stderr().split('\n').filter((line) => line.includes('"msg":"connections refused"')).map((line) => JSON.parse(line));
      assert.ok(refusals.some((line) => line.listener === 'api' && line.reason === 'per_address' && line.count >= 1 && line.limit === 20 && line.remote === '127.0.2.1'), JSON.stringify(refusals));
      assert.ok(refusals.some((line) => line.listener === 'api' && line.reason === 'total' && line.count >= 1 && line.limit === 30), JSON.stringify(refusals));
    } finally {
      await serve.stop();
    }
  });

  it('keeps its descriptors within server.max_connections under a flood of connections from many addresses', async () => {
    const serve = await startServe(env({ LICENSE_MAX_CONNECTIONS: '40', LICENSE_MAX_CONNECTIONS_PER_ADDRESS: '20' }));
    try {
      const before = descriptors(serve);
      const flood = keep(await openMany(serve.url, 600, (i) => ({ localAddress: `127.0.3.${1 + (i % 12)}` }))).connections;
      // Those refused are closed at once: wait for them, not for the headers limit.
      const deadline = Date.now() + headersLimitMs(30) / 2;
      while (flood.filter((c) => !c.isEnded()).length > 40 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      const admitted = flood.filter((c) => !c.isEnded());
      assert.ok(admitted.length <= 40 && admitted.length > 0, `${admitted.length} of 600 still open`);
      assert.ok(descriptors(serve) <= before + 40 + 2, `descriptors: ${before} before, ${descriptors(serve)} with ${admitted.length} admitted`);
      const perAddress = new Map<string, number>();
      for (const c of admitted) perAddress.set(c.socket.localAddress!, (perAddress.get(c.socket.localAddress!) ?? 0) + 1);
      assert.ok(Math.max(...perAddress.values()) <= 20, JSON.stringify([...perAddress]));
      assert.ok(flood.filter((c) => c.isEnded()).every((c) => c.received() === ''), 'refused unanswered');
    } finally {
      await serve.stop();
    }
  });

  it('holds the metrics listener (server.metrics_port) to the same limits: headers time and connections per address', async () => {
    const requestTimeout = silenceLimitSeconds();
    const serve = await startServe(env({ LICENSE_METRICS_PORT: '0', LICENSE_REQUEST_TIMEOUT: String(requestTimeout), LICENSE_MAX_CONNECTIONS_PER_ADDRESS: '20' }));
    try {
      const metricsUrl = /metrics listening on (http:\/\/\S+)\/metrics/.exec(serve.stdout())![1]!;
      const before = descriptors(serve);
      const opened = keep(await openMany(metricsUrl, 20, () => ({ localAddress: '127.0.4.1' })));
      const over = keep({ connections: [await openQuiet(metricsUrl, { localAddress: '127.0.4.1' })] }).connections[0]!;
      await over.ended;
      assert.ok(opened.connections.every((c) => !c.isEnded()), 'the 21st from one address was closed at once');
      await eventually(() => /"msg":"connections refused","listener":"metrics","reason":"per_address"/.test(serve.stderr()), 'the refusal is logged');
      await assertClosedAtLimit(serve, before, opened, headersLimitMs(requestTimeout), 'silent connections to the metrics listener');
    } finally {
      await serve.stop();
    }
  });

  describe('over TLS (serve --tls-cert --tls-key)', () => {
    let tlsArgs: string[];
    before(() => {
      const dir = mkdtempSync(path.join(tmpdir(), 'license-tls-'));
      dirs.push(dir);
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ed25519', '-nodes', '-days', '1', '-subj', '/CN=localhost',
        '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
      tlsArgs = ['--tls-cert', path.join(dir, 'cert.pem'), '--tls-key', path.join(dir, 'key.pem')];
    });

    it('closes a connection that never starts its handshake at the headers limit, unanswered and unlogged, and counts it against the caps', async () => {
      const requestTimeout = silenceLimitSeconds();
      const serve = await startServe(env({ LICENSE_REQUEST_TIMEOUT: String(requestTimeout), LICENSE_MAX_CONNECTIONS_PER_ADDRESS: '25' }), tlsArgs);
      try {
        const before = descriptors(serve);
        const opened = keep(await openMany(serve.url, 100, (i) => ({ localAddress: `127.0.5.${1 + (i % 4)}` })));
        const over = keep({ connections: [await openQuiet(serve.url, { localAddress: '127.0.5.1' })] }).connections[0]!;
        await over.ended;
        assert.ok(opened.connections.every((c) => !c.isEnded()), 'the 26th from one address was closed at once');
        await assertClosedAtLimit(serve, before, opened, headersLimitMs(requestTimeout), 'TLS connections without a handshake');
        assert.ok(opened.connections.every((c) => c.received() === ''));
        assert.doesNotMatch(serve.stderr(), /"route":"unparsed"/, 'a connection that made no request is not logged as one');
      } finally {
        await serve.stop();
      }
    });

    it('answers a connection silent after its handshake with 408 at the headers limit and lets its descriptor go', async () => {
      const requestTimeout = silenceLimitSeconds();
      const serve = await startServe(env({ LICENSE_REQUEST_TIMEOUT: String(requestTimeout) }), tlsArgs);
      try {
        const before = descriptors(serve);
        const opened = keep(await openMany(serve.url, 100, (i) => ({ localAddress: `127.0.6.${1 + (i % 4)}`, tls: 'handshake' })));
        await assertClosedAtLimit(serve, before, opened, headersLimitMs(requestTimeout), 'TLS connections silent after their handshake');
        assert.ok(opened.connections.every((c) => /^HTTP\/1\.1 408 /.test(c.received())), opened.connections[0]!.received());
      } finally {
        await serve.stop();
      }
    });

    it('stops on SIGTERM without waiting for the handshakes still open', async () => {
      const serve = await startServe(env(), tlsArgs);
      const { connections } = keep(await openMany(serve.url, 20, () => ({ localAddress: '127.0.7.1' })));
      const { code, ms } = await serve.stop();
      assert.equal(code, 0);
      const firstLimit = Math.min(...connections.map((c) => c.openedAt)) + headersLimitMs(30);
      assert.ok(Date.now() < firstLimit, `the stop took ${ms} ms, until the handshake limit of the connections had passed`);
    });
  });
});

describe('addressKey (what a connection counts under for server.max_connections_per_address)', () => {
  it('counts an IPv4 client by its address, an IPv4-mapped one as IPv4, and an IPv6 client by its /64', () => {
    assert.equal(addressKey('203.0.113.7'), '203.0.113.7');
    assert.equal(addressKey('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(addressKey('::FFFF:203.0.113.7'), '203.0.113.7');
    assert.equal(addressKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
    assert.equal(addressKey('2001:db8:1:2::99'), '2001:db8:1:2::/64');
    assert.equal(addressKey('2001:0db8:0001:0002:ffff::1'), '2001:db8:1:2::/64');
    assert.equal(addressKey('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(addressKey('2001:db8:1::'), '2001:db8:1:0::/64');
    assert.equal(addressKey('::1'), '0:0:0:0::/64');
    assert.equal(addressKey('::'), '0:0:0:0::/64');
    assert.equal(addressKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
    assert.equal(addressKey('64:ff9b::192.0.2.1'), '64:ff9b:0:0::/64');
    assert.equal(addressKey(undefined), undefined);
    assert.equal(addressKey(''), undefined);
  });
});
