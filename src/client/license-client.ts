import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { KeySet } from '../lib/crypto/key-set.js';
import { isLicenseServerError } from '../lib/errors.js';
import { setLongTimeout, setTimerUntil, type LongTimer } from '../lib/long-timer.js';
import { describeFsError } from '../lib/fs-errors.js';
import { verifyGraceToken } from '../lib/licensing/grace-token.js';
import { licenseKeyPrefix, normalizeLicenseKey } from '../lib/licensing/license-key.js';
import { unsealDecryptionKey } from '../lib/offline/binding.js';
import type { LicenseFileEntitlement } from '../lib/offline/format.js';
import { decodeBase64UrlStrict } from '../lib/offline/activation-request.js';
import { verifyLicenseFile } from '../lib/offline/verify.js';
import { unsealForMachine } from '../lib/offline/machine-key.js';
import { publicKeyOf } from '../lib/crypto/hpke.js';
import { deriveHardwareId } from './hardware-id.js';
import { findPreviousHardwareId } from './previous-hardware-id.js';
import { KeyRing, type KeyRefreshResult } from './key-refresh.js';
import { LicenseClientConfigError, resolveOptions, systemClock, type Clock, type LicenseClientOptions, type ResolvedOptions } from './options.js';
import { CacheWriteError, ClientStore, type QueuedUsage, type Verdict } from './store.js';
import { OfflineTrust, type Save } from './trust.js';
import { postJson, type ServerReply } from './transport.js';
import { LicenseClientError } from './errors.js';
import {
  createActivationRequest,
  installLicenseFile,
  type ActivationContext,
  type ActivationRequestOptions,
  type ActivationRequestResult,
  type InstallOptions,
  type InstallResult,
} from './activation.js';

export type Tier = 'online' | 'license-file' | 'grace-token';

export interface TierFailure {
  readonly tier: Tier;
  readonly code: string;
  readonly message: string;
}

export interface ValidationResult {
  readonly valid: boolean;
  /** True when the answer came from the `.lic` file or the grace token, not the server. */
  readonly isOffline: boolean;
  /** Which tier answered; undefined when none did. */
  readonly source?: Tier;
  /** The license's 32-byte decryption key, when it carries one, unsealed for this machine. */
  readonly decryptionKey?: Uint8Array;
  readonly licenseId?: string;
  readonly entitlements: readonly LicenseFileEntitlement[];
  /** Why the license is not valid: the server's reason, or the last tier's. */
  readonly reason?: string;
  /** Each tier's failure, in chain order, when no tier could vouch for the license. */
  readonly failures: readonly TierFailure[];
  /** What went wrong besides the answer, e.g. a cache file that could not be written; never changes `valid`. */
  readonly warnings: readonly ClientWarning[];
  hasEntitlement(code: string): boolean;
}

/** Something the application may want to log; the answer stands regardless. */
export interface ClientWarning {
  /** `CACHE_NOT_WRITTEN`: a state file in the cache directory could not be written or removed. */
  readonly code: 'CACHE_NOT_WRITTEN';
  /** The file or directory and the reason, e.g. "cannot create the cache directory ...: permission denied". */
  readonly message: string;
}

export interface UsageResult {
  /** Counted by the server now. */
  readonly accepted: boolean;
  /** Kept in the offline queue, to be sent (exactly once) when the server is back. */
  readonly queued: boolean;
  readonly remaining?: number | null;
}

export interface ReleaseResult {
  /** True when this machine held a lease, now given up; false when it held none, or the license is not floating. */
  readonly released: boolean;
  /**
   * When the seat is free for another machine (RFC 3339), or null when this machine holds
   * none: the end of the grace token it was given, which a copy could still use until then.
   */
  readonly seatFreeAt: string | null;
  readonly message: string;
}

export { LicenseClientError };

/**
 * The license client of spec sections 1, 2.5-2.7, 5 and 6: online validation, then the
 * `.lic` file, then the cached grace token. Only an unreachable server (no connection, a
 * timeout, 5xx, 429, garbage) moves down the chain; the server's "not valid" is final, is
 * remembered (revoked.json) and refuses the offline tiers until the server says valid again.
 * Imports nothing of the server (a test checks).
 */
export class LicenseClient {
  readonly hardwareId: string;
  private readonly hardwareIdDerived: boolean;
  /** The hw1 ID this machine used before, found once (previous-hardware-id.ts). */
  private previousId: Promise<string | undefined> | undefined;
  private readonly options: ResolvedOptions;
  private readonly callbacks: Pick<LicenseClientOptions, 'onOfflineModeEnter' | 'onOfflineModeExit' | 'onGracePeriodExpired'>;
  private readonly clock: Clock;
  private readonly store: ClientStore;
  private readonly trust: OfflineTrust;
  private readonly keyRing: KeyRing;
  private readonly keyPrefix: string;
  private offline = false;
  private closed = false;
  /** The last failed attempt timed out: validate() leaves the network to the reconnect loop until it succeeds. */
  private lastAttemptTimedOut: { reason: string } | undefined;
  private retrying = false;
  private retryAttempt = 0;
  private retryTimer: LongTimer | undefined;
  private graceTimer: LongTimer | undefined;
  private leaseTimer: LongTimer | undefined;
  private graceExpiredFired = false;
  private flushing: Promise<void> | undefined;

  /** Throws LicenseClientConfigError, and only that, for options it cannot work with. */
  constructor(options: LicenseClientOptions) {
    this.options = resolveOptions(options);
    this.hardwareId = this.options.hardwareId ?? derivedHardwareId();
    this.hardwareIdDerived = this.options.hardwareId === undefined;
    this.callbacks = options;
    this.clock = options.clock ?? systemClock;
    this.store = new ClientStore(this.options.offline.cacheDir, this.options.licenseKey);
    this.trust = new OfflineTrust(this.store, this.options.offline.enabled);
    const { offline } = this.options;
    // Without offline mode no key is ever used, so none is fetched.
    const refresh = offline.enabled ? offline.keyRefresh : { ...offline.keyRefresh, enabled: false };
    this.keyRing = new KeyRing(offline.publicKey ?? [], refresh, this.store, this.options.baseUrl, this.options, this.clock);
    const normalized = normalizeLicenseKey(this.options.licenseKey);
    this.keyPrefix = licenseKeyPrefix(normalized ?? this.options.licenseKey.toUpperCase());
  }

  /**
   * The key set of offline.publicKey, parsed once by resolveOptions, and the keys a key
   * refresh accepted (key-refresh.ts). Only read with offline mode on, where the option is
   * required; a file or token is checked with the key its key_id / kid names, or with each
   * key when it names none.
   */
  private keySet(): Promise<KeySet> {
    return this.keyRing.keySet();
  }

  /**
   * The `hw1-` ID this machine used before it derived its `hw2-` one, or undefined: sent as
   * `previous_hardware_id` so that the server moves its machine record (and seat) to the new
   * ID, and accepted in a `.lic` file or grace token bound to it (docs/client.md, "Moving
   * from hw1 to hw2").
   */
  private previousHardwareId(save: Save = quietSave): Promise<string | undefined> {
    this.previousId ??= findPreviousHardwareId(
      {
        hardwareId: this.hardwareId,
        derived: this.hardwareIdDerived,
        store: this.store,
        offlineEnabled: this.options.offline.enabled,
        licenseFile: this.options.offline.licenseFile,
      },
      save,
    ).catch(() => undefined);
    return this.previousId;
  }

  /** The IDs a file or token of this machine may be bound to: the one in use, then the previous one. */
  private async boundIds(save: Save = quietSave): Promise<string[]> {
    const previous = await this.previousHardwareId(save);
    return previous === undefined ? [this.hardwareId] : [this.hardwareId, previous];
  }

  /**
   * Fetches the server's public key set now and takes what the trust rule allows
   * (offline.keyRefresh; docs/client.md, "Key refresh"). Never throws: a failed fetch
   * resolves with `fetched: false` and its reason, and the keys stay as they were.
   */
  refreshKeys(): Promise<KeyRefreshResult> {
    return this.keyRing.refresh();
  }

  /** True while the server is unreachable (always in offline mode) and the client answers from its offline tiers. */
  get isOffline(): boolean {
    return this.offline || this.options.mode === 'offline';
  }

  /** Never throws: every failure ends in an invalid result with a reason. */
  async validate(): Promise<ValidationResult> {
    if (this.closed) return this.invalid(false, [{ tier: 'online', code: 'CLIENT_CLOSED', message: 'the client is closed' }]);
    const warnings = new CacheWarnings();
    try {
      return { ...(await this.runChain(warnings.save)), warnings: warnings.list };
    } catch (error) {
      const failure: TierFailure = { tier: 'online', code: 'INTERNAL', message: error instanceof Error ? error.message : String(error) };
      return { ...this.invalid(this.offline, [failure]), warnings: warnings.list };
    }
  }

  /**
   * Reports usage of an entitlement. Online it is counted at once; when the server cannot be
   * reached and offline usage reporting is on, it waits in a crash-safe queue and is sent,
   * in order and exactly once, when the server is back.
   */
  async reportUsage(code: string, quantity: number): Promise<UsageResult> {
    const report: QueuedUsage = {
      entitlement_code: code,
      quantity,
      occurred_at: this.clock.now().toISOString(),
      idempotency_key: randomUUID(),
    };
    if (!this.offline && this.options.mode === 'online') {
      const reply = await this.sendUsage(report);
      if (reply.kind === 'answer') {
        if (reply.status === 200 || reply.status === 201) return { accepted: true, queued: false, remaining: reply.body.remaining as number | null };
        throw rejection(reply.body, reply.status);
      }
    }
    if (!this.options.offline.enabled || !this.options.offline.allowOfflineUsageReporting) {
      if (this.options.mode === 'offline') throw new LicenseClientError('OFFLINE_ONLY', 'the client is in offline mode and offline usage reporting is off');
      throw new LicenseClientError('SERVER_UNREACHABLE', 'the server cannot be reached and offline usage reporting is off');
    }
    try {
      await this.store.enqueue(report);
    } catch (error) {
      if (error instanceof CacheWriteError) throw new LicenseClientError('CACHE_NOT_WRITTEN', `the report could not be queued: ${error.message}`);
      throw error;
    }
    return { accepted: false, queued: true };
  }

  /**
   * Gives a floating seat back (POST /api/v1/release), for an application that quits or no
   * longer needs its license. The grace token is deleted first: this machine stops using its
   * lease. The seat is free for another machine when that token would have ended
   * (`seatFreeAt`), not before: the server cannot know that no copy of the token is still
   * used offline. Offline files are kept; a seat an offline file holds stays taken until it ends.
   * Throws LicenseClientError: SERVER_UNREACHABLE (the lease then simply runs out),
   * CACHE_NOT_WRITTEN (the token cannot be deleted; nothing is sent), OFFLINE_ONLY, or the
   * server's error code.
   */
  async release(): Promise<ReleaseResult> {
    if (this.options.mode === 'offline') throw new LicenseClientError('OFFLINE_ONLY', 'the client is in offline mode: it holds no lease to give back');
    this.leaseTimer?.cancel();
    this.leaseTimer = undefined;
    if (this.options.offline.enabled) {
      try {
        await this.store.deleteGrace();
      } catch (error) {
        // A seat counted free while this machine still holds its lease on disk would be a seat twice.
        if (error instanceof CacheWriteError) throw new LicenseClientError('CACHE_NOT_WRITTEN', `the seat is kept: the grace token (its lease) cannot be deleted: ${error.message}`);
        throw error;
      }
    }
    const reply = await postJson(
      `${this.options.baseUrl}/api/v1/release`,
      { license_key: this.options.licenseKey, hardware_id: this.hardwareId },
      this.options,
    );
    if (reply.kind === 'unreachable') {
      throw new LicenseClientError('SERVER_UNREACHABLE', `${reply.reason}; the seat is given back when its lease runs out`);
    }
    if (reply.status !== 200) throw rejection(reply.body, reply.status, 'release');
    return {
      released: reply.body.released === true,
      seatFreeAt: typeof reply.body.seat_free_at === 'string' ? reply.body.seat_free_at : null,
      message: typeof reply.body.message === 'string' ? reply.body.message : '',
    };
  }

  /**
   * Makes an activation request for this machine (docs/client.md, "Activation by request
   * file"): the text to carry to the operator, who checks the license out with it
   * (`license checkout --request`). Its private key and nonce are kept in the cache directory
   * until installLicenseFile installs the answer, or returned with `keep: 'return'`.
   * Throws LicenseClientError (CACHE_NOT_WRITTEN, ACTIVATION_REQUEST_MALFORMED for a
   * machineName or appVersion the format does not take) or LicenseClientConfigError.
   */
  createActivationRequest(options?: ActivationRequestOptions): Promise<ActivationRequestResult> {
    return createActivationRequest(this.activationContext(), options);
  }

  /**
   * Installs the `.lic` file made from this machine's pending request at offline.licenseFile
   * (atomically), once it verifies and answers that request; a file for another machine or
   * an older request is refused with LICENSE_FILE_WRONG_REQUEST. Throws LicenseClientError.
   */
  installLicenseFile(file: string | Uint8Array, options?: InstallOptions): Promise<InstallResult> {
    return installLicenseFile(this.activationContext(), file, options);
  }

  private activationContext(): ActivationContext {
    const { offline } = this.options;
    return {
      store: this.store,
      licenseKey: this.options.licenseKey,
      version: this.options.version,
      hardwareId: this.hardwareId,
      cacheDir: offline.cacheDir,
      licenseFile: offline.licenseFile,
      clock: this.clock,
      keySet: async () => (offline.publicKey === undefined ? undefined : this.keySet()),
      previousHardwareId: () => this.previousHardwareId(),
    };
  }

  /**
   * The private key of the activation request whose file is installed (machine-key.json,
   * written by installLicenseFile), when the application passes none: it opens the sealed
   * key of a machine-key file. Undefined without a cache or such a record.
   */
  private async cachedMachinePrivateKey(): Promise<Uint8Array | undefined> {
    if (this.options.offline.cacheDir === '') return undefined;
    const record = await this.store.readMachineKey().catch(() => undefined);
    return record === undefined ? undefined : decodeBase64UrlStrict(record.private_key, 32);
  }

  /**
   * Opens an online answer's key sealed to a machine key (a machine-key license): with the
   * application's private key, or the cache's one whose public key the answer names, the
   * installed request's (machine-key.json) or one checked out but not installed yet
   * (pending-request.json). MACHINE_KEY_MISSING when none is this machine's.
   */
  private async unsealOnlineForMachine(sealed: Parameters<typeof unsealForMachine>[0]): Promise<Uint8Array> {
    const own = this.options.offline.machinePrivateKey;
    if (own) return unsealForMachine(sealed, own);
    const cached = this.options.offline.cacheDir === ''
      ? []
      : [await this.store.readMachineKey().catch(() => undefined), await this.store.readPendingRequest().catch(() => undefined)];
    for (const record of cached) {
      const privateKey = record === undefined ? undefined : decodeBase64UrlStrict(record.private_key, 32);
      if (!privateKey) continue;
      try {
        if (Buffer.from(publicKeyOf(privateKey)).toString('base64url') === sealed.machine_key) return unsealForMachine(sealed, privateKey);
      } finally {
        privateKey.fill(0);
      }
    }
    return unsealForMachine(sealed, undefined);
  }

  /** Stops every timer; the client answers nothing afterwards. */
  close(): void {
    this.closed = true;
    this.clearTimers();
  }

  private async runChain(save: Save): Promise<ValidationResult> {
    if (this.options.mode === 'offline') return this.runOfflineOnly(save);
    const failures: TierFailure[] = [];
    if (this.reconnectingInBackground()) {
      // The loop's own attempts bring the client back; a black-holed server must not cost every call its connect budget.
      failures.push({ tier: 'online', code: 'SERVER_UNREACHABLE', message: `${this.lastAttemptTimedOut!.reason}; reconnecting in the background` });
    } else {
      // Alongside the validation, so that an unreachable server costs its timeout once.
      const refreshing = this.keyRing.refreshIfDue();
      const online = await this.validateOnline(save, refreshing);
      await refreshing;
      if (online.kind === 'result') {
        if (this.offline) await this.leaveOfflineMode();
        else if (online.result.valid) void this.flushQueue();
        return online.result;
      }
      this.rememberUnreachable(online);
      failures.push({ tier: 'online', code: 'SERVER_UNREACHABLE', message: online.reason });
    }
    if (!this.options.offline.enabled) return this.invalid(false, failures);

    // One reading of the clock for the whole offline check; it becomes the trusted time.
    const now = this.clock.now();
    const refusal = await this.trust.check(now.getTime(), save);
    if (refusal) failures.push({ tier: 'license-file', ...refusal }, { tier: 'grace-token', ...refusal });
    const result = refusal
      ? this.invalid(true, failures)
      : ((await this.fromLicenseFile(now, failures, save))?.result ?? (await this.fromGraceToken(now, failures)) ?? this.invalid(true, failures));
    if (!this.offline) {
      this.offline = true;
      this.retryAttempt = 0;
      this.callbacks.onOfflineModeEnter?.(refusal ? 0 : await this.remainingGraceMs(now));
      this.scheduleRetry();
    }
    if (!result.valid) this.gracePeriodExpiredOnce(failures, 'GRACE_TOKEN_EXPIRED');
    return result;
  }

  /**
   * Offline mode, for an air-gapped machine: the `.lic` file alone, no network call ever.
   * The callbacks speak of the file: entering reports how long it stays valid, and its end
   * is the end of the grace period.
   */
  private async runOfflineOnly(save: Save): Promise<ValidationResult> {
    const now = this.clock.now();
    const failures: TierFailure[] = [];
    const refusal = await this.trust.check(now.getTime(), save);
    if (refusal) failures.push({ tier: 'license-file', ...refusal });
    const verified = refusal ? undefined : await this.fromLicenseFile(now, failures, save);
    const validUntil = verified?.validUntil;
    if (validUntil !== undefined) {
      // A new file put in place after the old one ran out starts a new grace period.
      this.graceExpiredFired = false;
      this.scheduleGraceExpiry(validUntil);
    }
    if (!this.offline) {
      this.offline = true;
      this.callbacks.onOfflineModeEnter?.(validUntil === undefined ? 0 : Math.max(0, validUntil - now.getTime()));
    }
    if (!verified) this.gracePeriodExpiredOnce(failures, 'LICENSE_EXPIRED');
    return verified?.result ?? this.invalid(true, failures);
  }

  /** onGracePeriodExpired, once per grace period, when `code` (what ends it) is among the failures. */
  private gracePeriodExpiredOnce(failures: readonly TierFailure[], code: string): void {
    if (this.graceExpiredFired || !failures.some((failure) => failure.code === code)) return;
    this.graceExpiredFired = true;
    this.callbacks.onGracePeriodExpired?.();
  }

  /**
   * Offline after a timeout, with a reconnect attempt scheduled or under way: that loop, not
   * validate(), goes to the network, so a black-holed server costs one connect budget and
   * not one per call. A refused connection or an error answer costs nothing: those are tried.
   */
  private reconnectingInBackground(): boolean {
    return this.offline && this.lastAttemptTimedOut !== undefined && (this.retryTimer !== undefined || this.retrying);
  }

  private rememberUnreachable(attempt: { reason: string; timedOut?: true }): void {
    this.lastAttemptTimedOut = attempt.timedOut ? { reason: attempt.reason } : undefined;
  }

  private async validateOnline(save: Save, refreshing?: Promise<unknown>): Promise<{ kind: 'result'; result: ValidationResult } | { kind: 'unreachable'; reason: string; timedOut?: true }> {
    const previous = await this.previousHardwareId(save);
    const reply = await postJson(
      `${this.options.baseUrl}/api/v1/validate`,
      {
        license_key: this.options.licenseKey,
        hardware_id: this.hardwareId,
        version: this.options.version,
        ...(previous === undefined ? {} : { previous_hardware_id: previous }),
      },
      this.options,
    );
    if (reply.kind === 'unreachable') return reply;
    const { body, status } = reply;
    if (status === 200 && body.valid === true && typeof body.grace_token === 'string' && Array.isArray(body.entitlements) && typeof body.license_id === 'string') {
      let decryptionKey: Uint8Array | undefined;
      if (typeof body.encrypted_key === 'string') {
        try {
          decryptionKey = typeof body.machine_key === 'string'
            ? await this.unsealOnlineForMachine({ encrypted_key: body.encrypted_key, machine_key: body.machine_key, license_id: body.license_id, hardware_id: this.hardwareId })
            : unsealDecryptionKey(body.encrypted_key, this.hardwareId, body.license_id);
        } catch (error) {
          return { kind: 'result', result: this.invalid(false, [failureOf('online', error)]) };
        }
      }
      await this.rememberValid(body, save, refreshing);
      this.graceExpiredFired = false;
      this.scheduleLeaseRenewal(body.lease_expires_at, body.server_time);
      return {
        kind: 'result',
        result: this.valid('online', body.entitlements as LicenseFileEntitlement[], body.license_id, decryptionKey),
      };
    }
    if (status === 200 && body.valid === false && typeof body.reason === 'string') {
      // Authoritative, whatever the reason: a revoked license must not live on offline.
      const message = typeof body.message === 'string' ? body.message : 'the server says the license is not valid';
      await this.rememberInvalid(body.reason, message, body.server_time, save);
      return { kind: 'result', result: this.invalid(false, [{ tier: 'online', code: body.reason, message }]) };
    }
    if (status === 200) return { kind: 'unreachable', reason: 'the server answered JSON of an unexpected shape' };
    // Any other answer (a 4xx error) is about the request, not a verdict on the license: nothing is remembered.
    const error = body.error as { code?: unknown; message?: unknown } | undefined;
    return {
      kind: 'result',
      result: this.invalid(false, [{
        tier: 'online',
        code: typeof error?.code === 'string' ? error.code : `HTTP_${status}`,
        message: typeof error?.message === 'string' ? error.message : `the server refused the request (HTTP ${status})`,
      }]),
    };
  }

  /**
   * The server's time becomes the trusted time; the grace token is cached (only one that
   * verifies, and only next to a clock.json, without which it would count as tampered with).
   */
  private async rememberValid(body: Record<string, unknown>, save: Save, refreshing?: Promise<unknown>): Promise<void> {
    if (!(await this.trust.onlineAnswer(this.serverTime(body.server_time), undefined, save))) return;
    await refreshing;
    const token = String(body.grace_token);
    const verifies = async () => {
      try {
        verifyGraceToken(token, await this.keySet(), { now: this.clock.now(), hardwareId: this.hardwareId });
        return true;
      } catch {
        return false;
      }
    };
    // A token of a key the client does not know yet (a rotation since the last refresh) asks for the key set once.
    if (!(await verifies()) && !((await this.keyRing.refreshForUnknownKey(kidOf(token))) && (await verifies()))) return;
    const entry = {
      token: String(body.grace_token),
      license_id: String(body.license_id),
      entitlements: body.entitlements as LicenseFileEntitlement[],
      saved_at: this.clock.now().toISOString(),
    };
    await save(() => this.store.writeGrace(entry));
  }

  /** Keeps the verdict (memory and revoked.json) and purges the grace token. */
  private async rememberInvalid(reason: string, message: string, serverTime: unknown, save: Save): Promise<void> {
    const at = this.serverTime(serverTime);
    const verdict: Verdict = { reason, message, server_time: new Date(at).toISOString() };
    await this.trust.onlineAnswer(at, verdict, save);
    if (this.options.offline.enabled) await save(() => this.store.deleteGrace());
  }

  private serverTime(value: unknown): number {
    const parsed = typeof value === 'string' ? Date.parse(value) : Number.NaN;
    return Number.isNaN(parsed) ? this.clock.now().getTime() : parsed;
  }

  private async fromLicenseFile(now: Date, failures: TierFailure[], save: Save): Promise<{ result: ValidationResult; validUntil: number } | undefined> {
    const file = this.options.offline.licenseFile!;
    let bytes: Buffer;
    try {
      bytes = await readFile(file);
    } catch (error) {
      failures.push({ tier: 'license-file', code: 'LICENSE_FILE_UNREADABLE', message: `cannot read ${file}: ${describeFsError(error)}` });
      return undefined;
    }
    try {
      const publicKey = await this.keySet();
      const machinePrivateKey = this.options.offline.machinePrivateKey ?? (await this.cachedMachinePrivateKey());
      let verified: ReturnType<typeof verifyLicenseFile>;
      try {
        verified = await firstBound(await this.boundIds(save), (hardwareId) =>
          verifyLicenseFile(bytes, { publicKey, hardwareId, now, ...(machinePrivateKey ? { machinePrivateKey } : {}) }));
      } finally {
        // The application's own key is a copy (options.ts); the cache's is read again next time.
        if (machinePrivateKey !== this.options.offline.machinePrivateKey) machinePrivateKey?.fill(0);
      }
      if (verified.payload.license_key_prefix !== this.keyPrefix) {
        failures.push({ tier: 'license-file', code: 'LICENSE_FILE_MISMATCH', message: 'the license file is for another license key' });
        return undefined;
      }
      await this.trust.advanceTo(Date.parse(verified.payload.issued_at), save);
      return {
        result: this.valid('license-file', verified.payload.entitlements, verified.payload.license_id, verified.decryptionKey),
        validUntil: Date.parse(verified.payload.valid_until),
      };
    } catch (error) {
      failures.push(failureOf('license-file', error));
      return undefined;
    }
  }

  private async fromGraceToken(now: Date, failures: TierFailure[]): Promise<ValidationResult | undefined> {
    const cached = await this.store.readGrace();
    if (!cached) {
      failures.push({ tier: 'grace-token', code: 'NO_GRACE_TOKEN', message: 'no usable grace token is cached' });
      return undefined;
    }
    try {
      const keys = await this.keySet();
      const { claims } = await firstBound(await this.boundIds(), (hardwareId) => verifyGraceToken(cached.token, keys, { now, hardwareId }));
      if (claims.license_key_prefix !== this.keyPrefix) {
        failures.push({ tier: 'grace-token', code: 'GRACE_TOKEN_MISMATCH', message: 'the cached grace token is for another license key' });
        return undefined;
      }
      this.scheduleGraceExpiry(claims.exp * 1000);
      return this.valid('grace-token', claims.entitlements, claims.license_id, undefined);
    } catch (error) {
      failures.push(failureOf('grace-token', error));
      return undefined;
    }
  }

  private async remainingGraceMs(now: Date): Promise<number> {
    const cached = await this.store.readGrace();
    if (!cached) return 0;
    try {
      const keys = await this.keySet();
      const { claims } = await firstBound(await this.boundIds(), (hardwareId) => verifyGraceToken(cached.token, keys, { now, hardwareId }));
      return Math.max(0, claims.exp * 1000 - now.getTime());
    } catch {
      return 0;
    }
  }

  private scheduleRetry(): void {
    if (this.closed || !this.offline) return;
    const { retryInterval, maxRetryInterval, maxRetryAttempts } = this.options.offline;
    if (maxRetryAttempts > 0 && this.retryAttempt >= maxRetryAttempts) return;
    const delay = Math.min(retryInterval * 2 ** this.retryAttempt, maxRetryInterval);
    this.retryTimer = setLongTimeout(this.clock, delay, () => void this.retry());
  }

  private async retry(): Promise<void> {
    this.retryTimer = undefined;
    if (this.closed || !this.offline) return;
    this.retryAttempt += 1;
    this.retrying = true;
    try {
      // Nobody reads this answer: cache problems show in the next validate() result.
      const online = await this.validateOnline(new CacheWarnings().save);
      if (online.kind === 'result') {
        this.retrying = false;
        await this.leaveOfflineMode();
        return;
      }
      this.rememberUnreachable(online);
    } catch {
      // Same as unreachable: try again later.
    } finally {
      this.retrying = false;
    }
    this.scheduleRetry();
  }

  /**
   * A floating seat is a lease that ends unless validated again: renew it halfway through,
   * so that one failed attempt still leaves time for the next before the seat is lost. The
   * half is measured on the server's clock (lease end minus server time), then waited out as
   * elapsed time, so a client whose clock is off renews on time all the same.
   */
  private scheduleLeaseRenewal(leaseExpiresAt: unknown, serverTime: unknown): void {
    this.leaseTimer?.cancel();
    this.leaseTimer = undefined;
    const end = typeof leaseExpiresAt === 'string' ? Date.parse(leaseExpiresAt) : Number.NaN;
    const at = typeof serverTime === 'string' ? Date.parse(serverTime) : Number.NaN;
    if (this.closed || Number.isNaN(end) || Number.isNaN(at)) return;
    this.leaseTimer = setLongTimeout(this.clock, Math.max(1_000, (end - at) / 2), () => {
      this.leaseTimer = undefined;
      if (!this.closed && !this.offline) void this.validate();
    });
  }

  private scheduleGraceExpiry(expiresAt: number): void {
    this.graceTimer?.cancel();
    // When the token (or, in offline mode, the file) runs out, the chain runs again: the server may be back, or the grace is over.
    this.graceTimer = setTimerUntil(this.clock, expiresAt, () => {
      this.graceTimer = undefined;
      if (!this.closed && this.offline) void this.validate();
    });
  }

  private async leaveOfflineMode(): Promise<void> {
    if (!this.offline) return;
    this.offline = false;
    this.lastAttemptTimedOut = undefined;
    // The lease timer stays: the answer that brought the client back online just set it.
    this.retryTimer?.cancel();
    this.graceTimer?.cancel();
    this.retryTimer = undefined;
    this.graceTimer = undefined;
    this.callbacks.onOfflineModeExit?.();
    await this.flushQueue();
  }

  /**
   * Sends queued reports in order; stops at the first that cannot reach the server, or that
   * the server does not count because this machine holds no seat now (SEAT_REQUIRED): that
   * one waits for the next valid online validation. Other refusals are set aside.
   */
  private flushQueue(): Promise<void> {
    if (!this.options.offline.enabled) return Promise.resolve();
    this.flushing ??= (async () => {
      try {
        for (const { file, report } of await this.store.queued()) {
          const reply = await this.sendUsage(report);
          if (reply.kind === 'unreachable') return;
          // Counted once this machine holds a seat again: kept, in order, for a later flush.
          if (reply.status === 422 && (reply.body.error as { code?: unknown } | undefined)?.code === 'SEAT_REQUIRED') return;
          if (reply.status === 200 || reply.status === 201) await this.store.dequeue(file);
          else await this.store.setAside(file);
        }
      } catch {
        // A queue that cannot be changed stays as it is; the next flush tries again.
      } finally {
        this.flushing = undefined;
      }
    })();
    return this.flushing;
  }

  private sendUsage(report: QueuedUsage): Promise<ServerReply> {
    return postJson(
      `${this.options.baseUrl}/api/v1/usage`,
      { license_key: this.options.licenseKey, hardware_id: this.hardwareId, ...report },
      this.options,
    );
  }

  private clearTimers(): void {
    this.retryTimer?.cancel();
    this.graceTimer?.cancel();
    this.leaseTimer?.cancel();
    this.retryTimer = undefined;
    this.graceTimer = undefined;
    this.leaseTimer = undefined;
  }

  private valid(source: Tier, entitlements: readonly LicenseFileEntitlement[], licenseId: string, decryptionKey: Uint8Array | undefined): ValidationResult {
    const isOffline = source !== 'online';
    const restricted = this.options.offline.restrictedEntitlements;
    const codes = new Set(entitlements.map((entitlement) => entitlement.code));
    return {
      valid: true,
      isOffline,
      source,
      licenseId,
      entitlements,
      failures: [],
      warnings: [],
      ...(decryptionKey ? { decryptionKey } : {}),
      hasEntitlement: (code: string) => codes.has(code) && !(isOffline && restricted.has(code)),
    };
  }

  private invalid(isOffline: boolean, failures: readonly TierFailure[]): ValidationResult {
    return {
      valid: false,
      isOffline,
      entitlements: [],
      reason: failures[failures.length - 1]?.code,
      failures,
      warnings: [],
      hasEntitlement: () => false,
    };
  }
}

/** A cache write whose failure nobody reads: the next validation's warnings will show it. */
const quietSave: Save = (write) => write().then(() => true, () => false);

/**
 * The first check that passes for one of the IDs, in order; a HARDWARE_MISMATCH for one
 * tries the next, any other failure (and the last ID's) is thrown.
 */
async function firstBound<T>(ids: readonly string[], check: (hardwareId: string) => T): Promise<T> {
  for (const [i, id] of ids.entries()) {
    try {
      return check(id);
    } catch (error) {
      if (i === ids.length - 1 || !isLicenseServerError(error) || error.code !== 'HARDWARE_MISMATCH') throw error;
    }
  }
  throw new Error('no hardware ID to check');
}

/** The `kid` of a JWS's protected header, or undefined. */
function kidOf(token: string): string | undefined {
  try {
    const header = JSON.parse(Buffer.from(token.split('.')[0] ?? '', 'base64url').toString('utf8')) as { kid?: unknown };
    return typeof header.kid === 'string' ? header.kid : undefined;
  } catch {
    return undefined;
  }
}

function failureOf(tier: Tier, error: unknown): TierFailure {
  if (isLicenseServerError(error)) return { tier, code: error.code, message: error.message };
  return { tier, code: 'INTERNAL', message: error instanceof Error ? error.message : String(error) };
}

function rejection(body: Record<string, unknown>, status: number, what = 'report'): LicenseClientError {
  const error = body.error as { code?: unknown; message?: unknown } | undefined;
  return new LicenseClientError(
    typeof error?.code === 'string' ? error.code : `HTTP_${status}`,
    typeof error?.message === 'string' ? error.message : `the server refused the ${what} (HTTP ${status})`,
  );
}

/** The warnings of one validation: each distinct cache failure once. */
class CacheWarnings {
  readonly list: ClientWarning[] = [];
  readonly save: Save = async (write) => {
    try {
      await write();
      return true;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (!this.list.some((warning) => warning.message === message)) this.list.push({ code: 'CACHE_NOT_WRITTEN', message });
      return false;
    }
  };
}

function derivedHardwareId(): string {
  try {
    return deriveHardwareId();
  } catch (error) {
    // e.g. a sandbox where listing network interfaces fails.
    throw new LicenseClientConfigError(`cannot derive a hardware ID on this machine (${error instanceof Error ? error.message : String(error)}); set hardwareId`);
  }
}
