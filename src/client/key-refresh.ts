import { acceptOfferedKeys, type AllowedKey, type Endorsement, type OfferedKey } from '../lib/crypto/key-endorsement.js';
import { KEY_ID_PATTERN, type KeySet } from '../lib/crypto/key-set.js';
import { caseVariantMembers } from '../lib/offline/unique-members.js';
import type { Clock } from './options.js';
import type { ClientStore } from './store.js';
import { getJson, type Deadlines } from './transport.js';

/** offline.keyRefresh, checked (options.ts). */
export interface ResolvedKeyRefresh {
  readonly enabled: boolean;
  readonly intervalMs: number;
  readonly allowKeys: readonly AllowedKey[];
}

/** What refreshKeys() reports. */
export interface KeyRefreshResult {
  /** Whether a key set was fetched and read; false: `reason` says why, and the keys stay as they were. */
  readonly fetched: boolean;
  readonly reason?: string;
  /** The key ids trusted now: the built-in ones, then those accepted. */
  readonly trusted: readonly string[];
  /** Key ids of the fetched set that the trust rule accepted (built-in ones not counted). */
  readonly accepted: readonly string[];
  /** Key ids of the fetched set that it refused: no valid endorsement from a trusted key, not allowed. */
  readonly refused: readonly string[];
}

/** A refresh for a key id the client does not know waits at least this long after the last attempt. */
export const UNKNOWN_KEY_REFRESH_MS = 60_000;

/**
 * The client's key set: the keys it was built with (always trusted), plus keys taken from
 * the server's public key set (GET /.well-known/jwks.json) by the trust rule of
 * docs/public-keys.md: endorsed, transitively, by a trusted key, or allowed by the
 * application by key id and fingerprint. Accepted keys are kept in keys.json, with their
 * endorsements, and put through the rule again when read: the file cannot add a key by
 * itself. A fetch that fails, or a set that does not parse, changes nothing; a set that
 * parses replaces what an earlier one added, so a key the server retired is dropped.
 */
export class KeyRing {
  private accepted: readonly OfferedKey[] = [];
  private loaded: Promise<void> | undefined;
  /** When this process last tried to fetch (ms), or undefined. */
  private lastAttempt: number | undefined;
  /** When the accepted keys were fetched (this process, or keys.json). */
  private fetchedAt: number | undefined;
  private inFlight: Promise<KeyRefreshResult> | undefined;

  constructor(
    private readonly builtIn: KeySet,
    private readonly options: ResolvedKeyRefresh,
    private readonly store: ClientStore,
    /** Undefined in offline mode: the ring then only reads keys.json. */
    private readonly baseUrl: string | undefined,
    private readonly deadlines: Deadlines,
    private readonly clock: Clock,
  ) {}

  /** The keys to verify with: the built-in ones, then the accepted ones. */
  async keySet(): Promise<KeySet> {
    if (!this.options.enabled) return this.builtIn;
    await (this.loaded ??= this.load());
    return [...this.builtIn, ...this.accepted.map(({ keyId, publicKey }) => ({ keyId, publicKey }))];
  }

  /** A refresh when the interval has passed since the last one (this process or keys.json's); undefined when none is due. */
  refreshIfDue(): Promise<KeyRefreshResult> | undefined {
    if (!this.canFetch()) return undefined;
    const now = this.clock.now().getTime();
    if (this.lastAttempt !== undefined && now - this.lastAttempt < this.options.intervalMs) return undefined;
    return this.inFlight ?? this.startIfStale(now);
  }

  /** A refresh because something names `keyId`, which is not trusted; at most once a minute. */
  async refreshForUnknownKey(keyId: string | undefined): Promise<boolean> {
    if (!this.canFetch() || keyId === undefined || !KEY_ID_PATTERN.test(keyId)) return false;
    if ((await this.keySet()).some((key) => key.keyId === keyId)) return false;
    const now = this.clock.now().getTime();
    if (this.lastAttempt !== undefined && now - this.lastAttempt < UNKNOWN_KEY_REFRESH_MS && !this.inFlight) return false;
    const result = await this.refresh();
    return result.accepted.includes(keyId);
  }

  /** Fetches now (or joins the fetch under way). Never rejects. */
  refresh(): Promise<KeyRefreshResult> {
    if (!this.canFetch()) return Promise.resolve(this.outcome(false, 'key refresh is off, or the client is in offline mode', []));
    this.inFlight ??= this.fetchAndAccept().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private canFetch(): boolean {
    return this.options.enabled && this.baseUrl !== undefined;
  }

  private async startIfStale(now: number): Promise<KeyRefreshResult> {
    await (this.loaded ??= this.load());
    // A fresh keys.json from an earlier run counts as this process's refresh.
    if (this.lastAttempt === undefined && this.fetchedAt !== undefined && now - this.fetchedAt < this.options.intervalMs && now >= this.fetchedAt) {
      this.lastAttempt = this.fetchedAt;
      return this.outcome(false, 'the cached key set is recent', []);
    }
    return this.refresh();
  }

  private async load(): Promise<void> {
    const record = await this.store.readKeys();
    if (!record) return;
    const offered = offeredKeysOf(record.keys);
    this.accepted = acceptOfferedKeys(this.builtIn, offered, this.options.allowKeys);
    const at = typeof record.fetched_at === 'string' ? Date.parse(record.fetched_at) : Number.NaN;
    if (!Number.isNaN(at)) this.fetchedAt = at;
  }

  private async fetchAndAccept(): Promise<KeyRefreshResult> {
    await (this.loaded ??= this.load());
    const started = this.clock.now();
    this.lastAttempt = started.getTime();
    let offered: OfferedKey[];
    try {
      const reply = await getJson(`${this.baseUrl}/.well-known/jwks.json`, this.deadlines);
      if (reply.kind === 'unreachable') return this.outcome(false, reply.reason, []);
      // A set with "keys" and "Keys" is no set: readers would differ on which holds the keys.
      if (reply.status !== 200 || !Array.isArray(reply.body.keys) || caseVariantMembers(reply.body)) return this.outcome(false, `the server answered no key set (HTTP ${reply.status})`, []);
      offered = offeredKeysOf(reply.body.keys);
    } catch (error) {
      return this.outcome(false, error instanceof Error ? error.message : String(error), []);
    }
    const accepted = acceptOfferedKeys(this.builtIn, offered, this.options.allowKeys);
    this.accepted = accepted;
    this.fetchedAt = started.getTime();
    try {
      await this.store.writeKeys({ fetched_at: started.toISOString(), keys: accepted.map(jwkOf) });
    } catch {
      // Kept in memory for this process; the next start fetches again.
    }
    const trusted = new Set([...this.builtIn.map((key) => key.keyId), ...accepted.map((key) => key.keyId)]);
    return this.outcome(true, undefined, offered.filter((key) => !trusted.has(key.keyId)).map((key) => key.keyId));
  }

  private outcome(fetched: boolean, reason: string | undefined, refused: readonly string[]): KeyRefreshResult {
    return {
      fetched,
      ...(reason === undefined ? {} : { reason }),
      trusted: [...this.builtIn.map((key) => key.keyId), ...this.accepted.map((key) => key.keyId)],
      accepted: this.accepted.map((key) => key.keyId),
      refused,
    };
  }
}

/**
 * The keys of a JWK Set as the server publishes it (docs/http-api.md, "Public key set"): an
 * entry that is not an Ed25519 OKP key with a key id is left out, and so is an endorsement
 * that is not a key id and 64 signature bytes. An entry or endorsement with two member names
 * that differ only in case (`x` and `X`) is left out too: a reader that matches names without
 * case (the Go client did) would read another key from it. Whether a key is taken is the
 * trust rule's to say.
 */
export function offeredKeysOf(value: unknown): OfferedKey[] {
  if (!Array.isArray(value)) return [];
  const keys: OfferedKey[] = [];
  for (const entry of value) {
    if (typeof entry !== 'object' || entry === null || caseVariantMembers(entry)) continue;
    const { kty, crv, x, kid, endorsements } = entry as Record<string, unknown>;
    if (kty !== 'OKP' || crv !== 'Ed25519' || typeof x !== 'string' || typeof kid !== 'string' || !KEY_ID_PATTERN.test(kid)) continue;
    const publicKey = base64url(x);
    if (publicKey?.length !== 32) continue;
    const list: Endorsement[] = [];
    for (const item of Array.isArray(endorsements) ? endorsements : []) {
      if (typeof item !== 'object' || item === null || caseVariantMembers(item)) continue;
      const { signer_key_id: signer, signature } = item as Record<string, unknown>;
      const bytes = typeof signature === 'string' ? base64url(signature) : undefined;
      if (typeof signer === 'string' && KEY_ID_PATTERN.test(signer) && bytes?.length === 64) list.push({ signerKeyId: signer, signature: bytes });
    }
    keys.push({ keyId: kid, publicKey, endorsements: list });
  }
  return keys;
}

function jwkOf(key: OfferedKey): Record<string, unknown> {
  return {
    kty: 'OKP',
    crv: 'Ed25519',
    x: Buffer.from(key.publicKey).toString('base64url'),
    kid: key.keyId,
    endorsements: key.endorsements.map((e) => ({ signer_key_id: e.signerKeyId, signature: Buffer.from(e.signature).toString('base64url') })),
  };
}

/** Strict unpadded base64url (RFC 4648 section 5); undefined for anything else. */
function base64url(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? new Uint8Array(bytes) : undefined;
}
