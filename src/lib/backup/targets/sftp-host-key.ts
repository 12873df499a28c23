import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The SFTP target's host key check: the key an SSH server shows is accepted only when it is
 * pinned, by its SHA256 fingerprint or by a known_hosts entry for the host, as OpenSSH's
 * `StrictHostKeyChecking yes` does (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"; hostfile.c and
 * match.c for the details followed here). Nothing is ever learnt or written back.
 */

/** How the operator pinned the server's key. */
export type PinnedHostKey = { readonly fingerprints: readonly string[] } | { readonly knownHosts: string };

export type HostKeyVerdict =
  | { readonly accepted: true }
  | { readonly accepted: false; readonly why: string };

/**
 * The fingerprint `ssh-keygen -lf` prints for a public key blob (RFC 4253 section 6.6
 * encoding): "SHA256:" and the unpadded base64 of the blob's SHA-256.
 */
export function sha256Fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** The key type a public key blob names in its first string ("ssh-ed25519", "ssh-rsa", ...). */
export function keyTypeOf(blob: Buffer): string {
  if (blob.length < 4) return 'unknown';
  const length = blob.readUInt32BE(0);
  if (length > 64 || 4 + length > blob.length) return 'unknown';
  return blob.subarray(4, 4 + length).toString('latin1');
}

const FINGERPRINT = /^SHA256:([A-Za-z0-9+/]{43})=?$/;

/** What is wrong with the pinned fingerprints, checked up front so that a typo is a configuration error and not a refused server. */
export function fingerprintProblem(fingerprints: readonly string[]): string | undefined {
  if (fingerprints.length === 0) return 'no host key fingerprint is pinned';
  const invalid = fingerprints.find((fingerprint) => !FINGERPRINT.test(fingerprint.trim()));
  return invalid === undefined ? undefined : `${JSON.stringify(invalid)} is not a host key fingerprint as ssh-keygen -lf prints it (SHA256:...)`;
}

/**
 * The name known_hosts files know a server by: the host alone on port 22, else
 * "[host]:port" (OpenSSH's put_host_port()).
 */
export function knownHostsName(host: string, port: number): string {
  const lower = host.toLowerCase();
  return port === 22 ? lower : `[${lower}]:${port}`;
}

interface KnownHostsEntry {
  readonly marker: 'revoked' | 'cert-authority' | undefined;
  readonly hosts: string;
  readonly keyType: string;
  readonly blob: Buffer;
}

function parseKnownHosts(text: string): KnownHostsEntry[] {
  const entries: KnownHostsEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    let marker: KnownHostsEntry['marker'];
    if (fields[0] === '@revoked' || fields[0] === '@cert-authority') {
      marker = fields[0] === '@revoked' ? 'revoked' : 'cert-authority';
      fields.shift();
    } else if (fields[0]?.startsWith('@')) {
      continue; // an unknown marker: OpenSSH skips the line too
    }
    const [hosts, keyType, key] = fields;
    if (!hosts || !keyType || !key || !/^[A-Za-z0-9+/]+={0,2}$/.test(key)) continue;
    entries.push({ marker, hosts, keyType, blob: Buffer.from(key, 'base64') });
  }
  return entries;
}

/** OpenSSH's match_pattern(): `*` any run of characters, `?` one, everything else literal. */
function matchesWildcard(name: string, pattern: string): boolean {
  const expression = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${expression}$`, 's').test(name);
}

/**
 * Whether a known_hosts host field names `name`: a hashed entry ("|1|salt|HMAC-SHA1 of the
 * name keyed by the salt"), or comma-separated patterns, where a matching negated pattern
 * ("!pattern") rules the line out whatever else matches (match_hostname()).
 */
function hostsFieldMatches(hosts: string, name: string): boolean {
  if (hosts.startsWith('|1|')) {
    const [, , salt, hash] = hosts.split('|');
    if (!salt || !hash) return false;
    const expected = Buffer.from(hash, 'base64');
    const actual = createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest();
    return expected.length === actual.length && timingSafeEqual(expected, actual);
  }
  let matched = false;
  for (const pattern of hosts.toLowerCase().split(',')) {
    if (pattern.startsWith('!')) {
      if (matchesWildcard(name, pattern.slice(1))) return false;
    } else if (matchesWildcard(name, pattern)) {
      matched = true;
    }
  }
  return matched;
}

/**
 * The key types a known_hosts text pins for `name`, so that the client can ask the server
 * for one of them first (OpenSSH orders its HostKeyAlgorithms the same way): a server with
 * both an Ed25519 and an RSA key would otherwise show the one the client prefers by default.
 */
export function knownHostKeyTypes(knownHosts: string, host: string, port: number): string[] {
  const name = knownHostsName(host, port);
  const types = parseKnownHosts(knownHosts)
    .filter((entry) => entry.marker === undefined && hostsFieldMatches(entry.hosts, name))
    .map((entry) => keyTypeOf(entry.blob));
  return [...new Set(types)];
}

/**
 * Whether the key `blob` the server at host:port showed is pinned. A key marked `@revoked`
 * is refused whatever host its line names; `@cert-authority` lines pin no key (host
 * certificates are not accepted).
 */
export function verifyHostKey(pinned: PinnedHostKey, host: string, port: number, blob: Buffer): HostKeyVerdict {
  const fingerprint = sha256Fingerprint(blob);
  const shown = `${fingerprint} (${keyTypeOf(blob)})`;
  if ('fingerprints' in pinned) {
    const wanted = new Set(pinned.fingerprints.map((value) => value.trim().replace(/=+$/, '')));
    return wanted.has(fingerprint) ? { accepted: true } : { accepted: false, why: `the server showed host key ${shown}, which is not the pinned fingerprint` };
  }
  const name = knownHostsName(host, port);
  const entries = parseKnownHosts(pinned.knownHosts);
  if (entries.some((entry) => entry.marker === 'revoked' && entry.blob.equals(blob))) {
    return { accepted: false, why: `the server showed host key ${shown}, which known_hosts marks @revoked` };
  }
  const forHost = entries.filter((entry) => entry.marker === undefined && hostsFieldMatches(entry.hosts, name));
  if (forHost.some((entry) => entry.blob.equals(blob))) return { accepted: true };
  if (forHost.length === 0) return { accepted: false, why: `known_hosts has no entry for ${name}; the server showed host key ${shown}` };
  return { accepted: false, why: `the server showed host key ${shown}, which is not the one known_hosts pins for ${name} (a changed host key)` };
}
