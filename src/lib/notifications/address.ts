import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { LicenseServerError } from '../errors.js';

/**
 * Link-local ranges: 169.254.0.0/16, where cloud metadata services answer (169.254.169.254
 * hands out instance credentials), and fe80::/10. An IPv4-mapped IPv6 address
 * (::ffff:169.254.169.254) reaches the IPv4 one, so it is listed too.
 */
const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('::ffff:169.254.0.0', 112, 'ipv6');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');

export function isLinkLocal(address: string): boolean {
  const bare = address.replace(/%.*$/, '');
  const version = isIP(bare);
  return version !== 0 && LINK_LOCAL.check(bare, version === 4 ? 'ipv4' : 'ipv6');
}

/** Resolves a host name to every address it has (tests pass their own). */
export type Resolver = (hostname: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: number }>>;

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))));

function refused(what: string, address: string): LicenseServerError {
  return new LicenseServerError(
    'WEBHOOK_ADDRESS_REFUSED',
    `${what} ${address}, a link-local address (cloud metadata services answer there); set notifications.allow_link_local to allow it`,
  );
}

/** The IP address a URL names literally (brackets of IPv6 removed), or undefined for a host name. */
function literalAddress(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return isIP(host) ? host : undefined;
}

/**
 * Refuses a URL whose host is a literal link-local address (`notifications set`, and each
 * delivery before it connects). The WHATWG parser has already turned 2852039166 or
 * 0xa9.0xfe.0xa9.0xfe into 169.254.169.254. Host names are checked when resolved, by
 * guardedLookup: what they resolve to can change after the settings were saved.
 */
export function checkLiteralAddress(url: URL, what: string): void {
  const address = literalAddress(url);
  if (address !== undefined && isLinkLocal(address)) throw refused(what, address);
}

/**
 * A `lookup` for node:http that resolves with `resolve` and refuses the connection when any
 * address of the host is link-local. The socket connects to the very addresses checked here,
 * so a DNS answer that changes between a check and the connection cannot slip through.
 */
export function guardedLookup(resolve: Resolver, allowLinkLocal: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const fail = (error: NodeJS.ErrnoException) => callback(error, '', 0);
    resolve(hostname).then((found) => {
      const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
      const addresses: LookupAddress[] = found.filter((entry) => !family || entry.family === family).map((entry) => ({ address: entry.address, family: entry.family }));
      if (addresses.length === 0) return fail(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
      const linkLocal = allowLinkLocal ? undefined : addresses.find((entry) => isLinkLocal(entry.address));
      if (linkLocal) return fail(refused(`webhook host ${hostname} resolves to`, linkLocal.address));
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    }, fail);
  };
}
