import { isIPv6, type Server, type Socket } from 'node:net';

export interface ConnectionLimits {
  /** Connections this listener holds open at once (server.max_connections); 0: no limit. */
  readonly maxConnections: number;
  /** Of those, from one client address (server.max_connections_per_address); 0: no limit. */
  readonly maxPerAddress: number;
}

/** How often a refusal is logged at most, per reason: a flood must not become a flood of log lines. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

/**
 * Caps the connections `server` holds, in total and per client address, so that clients
 * that open connections and keep them (a flood, or a client that leaks them) cannot take the
 * daemon's descriptors. A connection over either cap is closed at once, before a byte is read
 * or written: an answer (a 503) would need its request read first, or the close would reset
 * the connection under the answer, and reading it means keeping the very descriptor the cap
 * exists to save. The total is Node's own `maxConnections`, which closes the extra connection
 * before any JavaScript object is made for it.
 *
 * An IPv6 client counts by its /64, the block one host is usually given, so that it cannot
 * pass the cap by using another of its addresses for every connection; an IPv4-mapped
 * address counts as the IPv4 address.
 */
export function limitConnections(server: Server, limits: ConnectionLimits, log: (entry: Record<string, unknown>) => void, listener: string): void {
  const refusals = new RefusalLog(log, listener, limits);
  if (limits.maxConnections > 0) {
    server.maxConnections = limits.maxConnections;
    server.on('drop', (data?: { remoteAddress?: string }) => refusals.note('total', data?.remoteAddress));
  }
  if (limits.maxPerAddress <= 0) return;
  const open = new Map<string, number>();
  // First, before Node's own listener sets HTTP (or TLS) up on a connection about to go.
  server.prependListener('connection', (socket: Socket) => {
    const address = addressKey(socket.remoteAddress);
    // Reset before its peer could be read: it holds nothing to count, but the requests that
    // came before the reset are still read and logged (docs/http-api.md).
    if (address === undefined) return;
    const count = open.get(address) ?? 0;
    if (count >= limits.maxPerAddress) {
      refusals.note('per_address', socket.remoteAddress);
      socket.destroy();
      return;
    }
    open.set(address, count + 1);
    socket.once('close', () => {
      const left = open.get(address)! - 1;
      if (left === 0) open.delete(address);
      else open.set(address, left);
    });
  });
}

/** The key a client address counts under: an IPv4 address, or an IPv6 address's /64. */
export function addressKey(address: string | undefined): string | undefined {
  if (!address) return undefined;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1];
  if (!isIPv6(address)) return address;
  const withoutZone = address.split('%', 1)[0]!;
  const [head, tail] = withoutZone.includes('::') ? withoutZone.split('::') : [withoutZone, undefined];
  const front = head ? head.split(':') : [];
  // A tail may end in dotted IPv4, two groups' worth; only the first four groups matter here.
  const back = tail === undefined ? [] : tail ? tail.split(':').flatMap((group) => (group.includes('.') ? ['0', '0'] : [group])) : [];
  const groups = tail === undefined ? front : [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
  return `${groups.slice(0, 4).map((group) => Number.parseInt(group, 16).toString(16)).join(':')}::/64`;
}

/**
 * One log line when refusals of a reason begin, then at most one per interval with how many
 * followed, while they go on.
 */
class RefusalLog {
  private readonly pending = new Map<'total' | 'per_address', { count: number; address: string | undefined; timer: NodeJS.Timeout }>();

  constructor(
    private readonly log: (entry: Record<string, unknown>) => void,
    private readonly listener: string,
    private readonly limits: ConnectionLimits,
  ) {}

  note(reason: 'total' | 'per_address', address: string | undefined): void {
    const window = this.pending.get(reason);
    if (window) {
      window.count += 1;
      window.address = address;
      return;
    }
    this.write(reason, 1, address);
    this.open(reason);
  }

  private open(reason: 'total' | 'per_address'): void {
    const timer = setTimeout(() => {
      const window = this.pending.get(reason)!;
      this.pending.delete(reason);
      if (window.count === 0) return;
      this.write(reason, window.count, window.address);
      this.open(reason);
    }, REFUSAL_LOG_INTERVAL_MS).unref();
    this.pending.set(reason, { count: 0, address: undefined, timer });
  }

  private write(reason: 'total' | 'per_address', count: number, address: string | undefined): void {
    this.log({
      time: new Date().toISOString(),
      level: 'warn',
      msg: 'connections refused',
      listener: this.listener,
      reason,
      limit: reason === 'total' ? this.limits.maxConnections : this.limits.maxPerAddress,
      count,
      ...(address ? { remote: address } : {}),
    });
  }
}
