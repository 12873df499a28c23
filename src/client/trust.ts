import type { ClientStore, ClockRecord, Verdict } from './store.js';

/** A clock set back by more than this while offline makes offline validation fail. */
export const CLOCK_ROLLBACK_TOLERANCE_MS = 5 * 60_000;

/** Why the offline tiers may not answer at all. */
export interface Refusal {
  readonly code: 'LICENSE_REVOKED' | 'CLOCK_UNTRUSTED' | 'CLOCK_ROLLBACK';
  readonly message: string;
}

/**
 * Runs one cache write and says whether it worked; a failure becomes a warning on the
 * result, never a failed validation.
 */
export type Save = (write: () => Promise<void>) => Promise<boolean>;

/**
 * What the offline tiers rely on besides the signed files: the latest time the client has
 * reason to trust, and the server's last authoritative verdict (docs/client.md, "Revocation"
 * and "Clock rollback"). Both live in memory and in the cache (clock.json, revoked.json), so
 * they hold across restarts and still within this process when the cache cannot be written.
 */
export class OfflineTrust {
  /** The latest trusted time this process knows (ms since the epoch). */
  private trusted: number | undefined;
  /** The last answer of the server in this process: it outranks older files on disk. */
  private online: { readonly at: number; readonly verdict: Verdict | undefined } | undefined;

  constructor(
    private readonly store: ClientStore,
    /** False without offline mode: nothing is kept on disk then. */
    private readonly persist: boolean,
  ) {}

  /**
   * An answer of the server: its time becomes the trusted time (also downwards, so a clock
   * that was once set far ahead stops blocking), and its verdict replaces any earlier one.
   * clock.json is written first, so no other state file exists without it; and a crash
   * between the two writes leaves a verdict in force, which is the safe side. Resolves to
   * whether clock.json was written.
   */
  async onlineAnswer(serverTime: number, verdict: Verdict | undefined, save: Save): Promise<boolean> {
    this.trusted = serverTime;
    this.online = { at: serverTime, verdict };
    if (!this.persist) return false;
    const saved = await save(() => this.store.writeClock(serverTime, verdict));
    await save(() => (verdict ? this.store.writeVerdict(verdict) : this.store.deleteVerdict()));
    return saved;
  }

  /**
   * Decides whether the offline tiers may answer at `now`, and advances the trusted time to
   * `now` whatever the outcome, so a failed check (an expired token seen at +73 h) still
   * counts when the clock is then set back. An untrusted clock record is never overwritten
   * from the local clock: only the server re-establishes it.
   */
  async check(now: number, save: Save): Promise<Refusal | undefined> {
    const [clock, verdictFile] = await Promise.all([this.store.readClock(), this.store.readVerdict()]);
    const verdict = this.verdict(clock, verdictFile);
    const trust = await this.trustedTime(clock);
    if ('refusal' in trust) return verdict ? revoked(verdict, this.store) : trust.refusal;
    const latest = trust.latest;
    if (latest === undefined || now > latest) {
      this.trusted = now;
      const copy = typeof verdict === 'object' ? verdict : clock.kind === 'trusted' ? clock.revoked : undefined;
      if (this.persist) await save(() => this.store.writeClock(now, copy));
    } else {
      this.trusted = latest;
    }
    if (verdict) return revoked(verdict, this.store);
    if (latest !== undefined && now < latest - CLOCK_ROLLBACK_TOLERANCE_MS) {
      return {
        code: 'CLOCK_ROLLBACK',
        message: `the system clock (${new Date(now).toISOString()}) is behind a time already seen (${new Date(latest).toISOString()}); it was set back`,
      };
    }
    return undefined;
  }

  /** A signed time later than any seen (a `.lic` file's issued_at) moves the trusted time on. */
  async advanceTo(ms: number, save: Save): Promise<void> {
    if (this.trusted !== undefined && ms <= this.trusted) return;
    this.trusted = ms;
    if (this.persist) await save(() => this.store.writeClock(ms, undefined));
  }

  /** The verdict in force: revoked.json, else its copy in clock.json, unless this process heard the server since. */
  private verdict(clock: ClockRecord, file: Verdict | 'damaged' | undefined): Verdict | 'damaged' | undefined {
    const onDisk = file ?? (clock.kind === 'trusted' ? clock.revoked : undefined);
    // A damaged record fails safe: someone changed it, and it may have said "revoked".
    if (onDisk === 'damaged' || !this.online) return onDisk;
    const diskAt = onDisk ? Date.parse(onDisk.server_time) : Number.NEGATIVE_INFINITY;
    return Number.isNaN(diskAt) || diskAt > this.online.at ? onDisk : this.online.verdict;
  }

  private async trustedTime(clock: ClockRecord): Promise<{ latest: number | undefined } | { refusal: Refusal }> {
    const onDisk = clock.kind === 'trusted' ? clock.latest : undefined;
    const latest = Math.max(this.trusted ?? Number.NEGATIVE_INFINITY, onDisk ?? Number.NEGATIVE_INFINITY);
    const known = Number.isFinite(latest) ? latest : undefined;
    // The server answered in this process: its time stands, whatever happened to the file.
    if (this.online) return { latest: known };
    const file = this.store.file('clock.json');
    const untrusted = (what: string) => ({
      refusal: {
        code: 'CLOCK_UNTRUSTED' as const,
        message: `${what}, so a clock set back cannot be detected; offline validation is refused until the server is reached again`,
      },
    });
    if (clock.kind === 'damaged') return untrusted(`the trusted time in ${file} cannot be read (${clock.why})`);
    if (clock.kind === 'missing') {
      for (const other of ['grace.json', 'revoked.json']) {
        if (await this.store.has(other)) return untrusted(`the trusted time ${file} is missing while ${other} is there`);
      }
    }
    // Missing with nothing else cached: a first run (or a cache that cannot be written).
    return { latest: known };
  }
}

function revoked(verdict: Verdict | 'damaged', store: ClientStore): Refusal {
  if (verdict === 'damaged') {
    return {
      code: 'LICENSE_REVOKED',
      message: `the record of the server's last verdict (${store.file('revoked.json')}) cannot be read; offline validation is refused until the server answers that the license is valid`,
    };
  }
  return {
    code: 'LICENSE_REVOKED',
    message: `the server answered at ${verdict.server_time} that this license is not valid (${verdict.reason}: ${verdict.message}); offline validation is refused until it answers valid again`,
  };
}
