import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP proxy on a loopback port in front of `target` (host:port) that a test can turn
 * into a faulty network: one that keeps every connection open but forwards nothing (as a
 * partition that the kernel does not see: no reset, no timeout, acknowledged bytes that go
 * nowhere), or one that resets every connection: those open now (reset()), or every one,
 * new ones too, as they arrive (resetting(true)), as a middlebox that kills the flows would.
 */
export interface TcpProxy {
  /** host:port to connect to instead of the target. */
  readonly addr: string;
  /** Holds every byte, both ways, on open and new connections alike, until resume(). */
  stall(): void;
  /** Forwards again, the held bytes first. */
  resume(): void;
  /** Resets every open connection, both sides (RST). */
  reset(): void;
  /** While on, resets every connection, open or new (a new one as soon as it is accepted, before a byte). */
  resetting(on: boolean): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  let stalled = false;
  let resettingAll = false;
  const pairs = new Set<{ client: Socket; upstream: Socket; flush(): void }>();
  const server = createServer((client) => {
    if (resettingAll) {
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(port, host);
    // What the network owes either side while stalled: bytes, an end, a close.
    const held: Array<() => void> = [];
    const deliver = (step: () => void) => (stalled ? held.push(step) : step());
    const pair = {
      client,
      upstream,
      flush() {
        for (const step of held.splice(0)) step();
      },
    };
    pairs.add(pair);
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      from.on('data', (chunk: Buffer) => deliver(() => !to.destroyed && to.write(chunk)));
      from.on('end', () => deliver(() => to.end()));
      from.on('close', () => deliver(close));
      from.on('error', () => undefined);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: own } = server.address() as AddressInfo;
  const resetOpen = () => {
    for (const pair of [...pairs]) {
      pairs.delete(pair);
      pair.client.resetAndDestroy();
      pair.upstream.resetAndDestroy();
    }
  };
  return {
    addr: `127.0.0.1:${own}`,
    stall() {
      stalled = true;
    },
    resume() {
      stalled = false;
      for (const pair of pairs) pair.flush();
    },
    reset: resetOpen,
    resetting(on) {
      resettingAll = on;
      if (on) resetOpen();
    },
    async close() {
      for (const pair of [...pairs]) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
