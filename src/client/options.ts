import { homedir, platform } from 'node:os';
import path from 'node:path';
import { parseKeySet, type KeySet, type KeySetInput } from '../lib/crypto/key-set.js';
import { isLicenseServerError } from '../lib/errors.js';
import { parseHardwareId } from '../lib/offline/binding.js';
import type { ResolvedKeyRefresh } from './key-refresh.js';

/** Spec section 2.6, in camelCase. Durations are milliseconds. */
export interface OfflineOptions {
  readonly enabled?: boolean;
  /** Where the grace token, the trusted time, a revocation and the usage queue live (created 0700). */
  readonly cacheDir?: string;
  /** The `.lic` file; required when offline mode is enabled. */
  readonly licenseFile?: string;
  /**
   * The server's Ed25519 public keys, required: one key (32 raw bytes, or the PEM of
   * `signing-key show`), a PEM text of several blocks (`signing-key show --all`), or a list
   * of those. Ship the current key and its successor, and a rotation breaks nothing: a file
   * or token is checked with the key its `key_id` / `kid` names, or with each key without one.
   */
  readonly publicKey?: KeySetInput;
  readonly retryInterval?: number;
  readonly maxRetryInterval?: number;
  /** 0: retry for ever. */
  readonly maxRetryAttempts?: number;
  /** Entitlement codes that answer false from hasEntitlement while offline. */
  readonly restrictedEntitlements?: readonly string[];
  readonly allowOfflineUsageReporting?: boolean;
  /**
   * Refreshes the key set from the server's public route (GET /.well-known/jwks.json), so
   * that files and grace tokens of a key made after the application was built verify. The
   * keys of `publicKey` stay trusted always; a fetched key is taken only when a trusted key
   * endorsed it or `allowKeys` names it (docs/client.md, "Key refresh"). Off by default.
   */
  readonly keyRefresh?: KeyRefreshOptions;
  /**
   * The machine's X25519 private key (32 bytes) of the activation request a machine-key
   * file answers (docs/offline-license-format.md, "The machine-key binding"), for an
   * application that stores it itself. It opens the file's decryption key, which nothing in
   * the file opens. Without it the client takes the key installLicenseFile kept in the cache
   * directory (machine-key.json); with neither, such a file's key is refused with
   * MACHINE_KEY_MISSING.
   */
  readonly machinePrivateKey?: Uint8Array;
}

export interface KeyRefreshOptions {
  readonly enabled?: boolean;
  /** Hours between refreshes (default 24); a token or file of an unknown key also triggers one, at most once a minute. */
  readonly intervalHours?: number;
  /** Keys taken without an endorsement: the key id and the SHA-256 fingerprint (hex) of `signing-key list`. */
  readonly allowKeys?: readonly { readonly keyId: string; readonly fingerprint: string }[];
}

/** What the client needs from time: the real clock, or a test's. */
export interface Clock {
  now(): Date;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * `online`: the server first, then the offline tiers (when offline mode is enabled).
 * `offline`: an air-gapped machine; no network call at all, the `.lic` file is the authority.
 */
export type ClientMode = 'online' | 'offline';

export interface LicenseClientOptions {
  /** `host:port` of the license server; leave it out (with offline mode enabled) for an air-gapped machine. */
  readonly serverAddr?: string;
  /** Default `online`, or `offline` when serverAddr is left out. */
  readonly mode?: ClientMode;
  /** Talk HTTPS to the server. */
  readonly https?: boolean;
  readonly licenseKey: string;
  /** The application's version, sent with every validation. */
  readonly version: string;
  /** A custom hardware ID; derived from the machine when omitted (docs/client.md). */
  readonly hardwareId?: string;
  readonly offline?: OfflineOptions;
  /** Every network call gives up after this long (default 10 s). */
  readonly requestTimeout?: number;
  /**
   * A connection that is not up after this long counts as unreachable (default 3 s), so a
   * black-holed server delays one validation by this much, not by the request timeout.
   */
  readonly connectTimeout?: number;
  readonly onOfflineModeEnter?: (remainingGraceMs: number) => void;
  readonly onOfflineModeExit?: () => void;
  readonly onGracePeriodExpired?: () => void;
  /** For tests: a clock whose time and timers the test controls. */
  readonly clock?: Clock;
}

export interface ResolvedOptions {
  readonly mode: ClientMode;
  /** Undefined in offline mode: nothing may be sent anywhere. */
  readonly baseUrl: string | undefined;
  /** The hardwareId option, checked; undefined: derive one. */
  readonly hardwareId: string | undefined;
  readonly licenseKey: string;
  readonly version: string;
  readonly requestTimeout: number;
  readonly connectTimeout: number;
  readonly offline: {
    readonly enabled: boolean;
    readonly cacheDir: string;
    readonly licenseFile: string | undefined;
    /** The key set of offline.publicKey, parsed once; undefined when none was given. */
    readonly publicKey: KeySet | undefined;
    readonly retryInterval: number;
    readonly maxRetryInterval: number;
    readonly maxRetryAttempts: number;
    readonly restrictedEntitlements: ReadonlySet<string>;
    readonly allowOfflineUsageReporting: boolean;
    readonly keyRefresh: ResolvedKeyRefresh;
    readonly machinePrivateKey: Uint8Array | undefined;
  };
}

/** The one error the LicenseClient constructor throws: options it cannot work with. */
export class LicenseClientConfigError extends Error {
  override readonly name = 'LicenseClientConfigError';
}

/** Checks the options at construction, with the spec's messages for the spec's two cases. */
export function resolveOptions(options: LicenseClientOptions): ResolvedOptions {
  const fail = (message: string): never => {
    throw new LicenseClientConfigError(message);
  };
  const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isObject(options)) fail('options must be an object with serverAddr, licenseKey and version');
  if (options.mode !== undefined && options.mode !== 'online' && options.mode !== 'offline') fail('mode must be "online" or "offline"');
  const mode: ClientMode = options.mode ?? (options.serverAddr === undefined ? 'offline' : 'online');
  if (mode === 'offline' && options.offline?.enabled !== true) {
    fail(options.mode === 'offline' ? 'offline mode needs offline.enabled: true' : 'server address must be <host>:<port>');
  }
  if (options.serverAddr !== undefined || mode === 'online') {
    if (typeof options.serverAddr !== 'string' || !/^[^\s/:]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/.test(options.serverAddr)) {
      fail('server address must be <host>:<port>');
    }
  }
  if (typeof options.licenseKey !== 'string' || options.licenseKey.trim() === '') fail('license key is required');
  if (typeof options.version !== 'string' || options.version === '') fail('version is required');
  let hardwareId: string | undefined;
  if (options.hardwareId !== undefined) {
    try {
      hardwareId = parseHardwareId(options.hardwareId);
    } catch (error) {
      fail((error instanceof Error ? error.message : String(error)).replace(/^hardware_id/, 'hardwareId'));
    }
  }
  if (options.offline !== undefined && !isObject(options.offline)) fail('offline must be an object');
  const offline = options.offline ?? {};
  const enabled = offline.enabled === true;
  if (offline.licenseFile !== undefined && typeof offline.licenseFile !== 'string') fail('licenseFile must be a path');
  if (enabled && !offline.licenseFile) fail('license file path is required');
  if (offline.cacheDir !== undefined && (typeof offline.cacheDir !== 'string' || offline.cacheDir === '')) fail('cacheDir must be a directory path');
  const restricted = offline.restrictedEntitlements ?? [];
  if (!Array.isArray(restricted) || restricted.some((code) => typeof code !== 'string')) fail('restrictedEntitlements must be an array of entitlement codes');
  for (const name of ['onOfflineModeEnter', 'onOfflineModeExit', 'onGracePeriodExpired'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') fail(`${name} must be a function`);
  }
  const clock = options.clock;
  if (clock !== undefined && (!isObject(clock) || typeof clock.now !== 'function' || typeof clock.setTimeout !== 'function' || typeof clock.clearTimeout !== 'function')) {
    fail('clock must have now(), setTimeout() and clearTimeout()');
  }
  // An empty list is no key at all.
  const keyInput = Array.isArray(offline.publicKey) && offline.publicKey.length === 0 ? undefined : offline.publicKey;
  if (enabled && keyInput === undefined) fail('public key is required');
  const publicKey = keyInput === undefined ? undefined : keySetOrFail(keyInput, fail);
  const duration = (value: number | undefined, fallback: number, name: string) => {
    const result = value ?? fallback;
    if (!Number.isFinite(result) || result <= 0) fail(`${name} must be a positive number of milliseconds`);
    return result;
  };
  const retryInterval = duration(offline.retryInterval, 30_000, 'retryInterval');
  const maxRetryInterval = duration(offline.maxRetryInterval, 300_000, 'maxRetryInterval');
  if (maxRetryInterval < retryInterval) fail('maxRetryInterval must not be less than retryInterval');
  const maxRetryAttempts = offline.maxRetryAttempts ?? 0;
  if (!Number.isSafeInteger(maxRetryAttempts) || maxRetryAttempts < 0) fail('maxRetryAttempts must be a non-negative integer (0: unlimited)');
  const requestTimeout = duration(options.requestTimeout, 10_000, 'requestTimeout');
  const keyRefresh = keyRefreshOrFail(offline.keyRefresh, fail);
  return {
    mode,
    baseUrl: mode === 'offline' ? undefined : `${options.https ? 'https' : 'http'}://${options.serverAddr}`,
    hardwareId,
    licenseKey: options.licenseKey.trim(),
    version: options.version,
    requestTimeout,
    connectTimeout: Math.min(duration(options.connectTimeout, 3_000, 'connectTimeout'), requestTimeout),
    offline: {
      enabled,
      cacheDir: offline.cacheDir ?? cacheDirOrFail(enabled, fail),
      licenseFile: offline.licenseFile,
      publicKey,
      retryInterval,
      maxRetryInterval,
      maxRetryAttempts,
      restrictedEntitlements: new Set(restricted),
      allowOfflineUsageReporting: offline.allowOfflineUsageReporting === true,
      keyRefresh,
      machinePrivateKey: machinePrivateKeyOrFail(offline.machinePrivateKey, fail),
    },
  };
}

function machinePrivateKeyOrFail(input: unknown, fail: (message: string) => never): Uint8Array | undefined {
  if (input === undefined) return undefined;
  if (!(input instanceof Uint8Array) || input.length !== 32) fail('machinePrivateKey must be the 32 bytes of an X25519 private key');
  // A copy: the application may zero its own.
  return Uint8Array.from(input);
}

function keyRefreshOrFail(input: unknown, fail: (message: string) => never): ResolvedKeyRefresh {
  if (input === undefined) return { enabled: false, intervalMs: 24 * 3_600_000, allowKeys: [] };
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return fail('keyRefresh must be an object');
  const { enabled, intervalHours, allowKeys } = input as KeyRefreshOptions;
  if (enabled !== undefined && typeof enabled !== 'boolean') fail('keyRefresh.enabled must be true or false');
  const hours = intervalHours ?? 24;
  if (typeof hours !== 'number' || !Number.isFinite(hours) || hours <= 0) fail('keyRefresh.intervalHours must be a positive number of hours');
  const allowed = allowKeys ?? [];
  if (!Array.isArray(allowed)) fail('keyRefresh.allowKeys must be an array of { keyId, fingerprint }');
  const checked = allowed.map((item: unknown, i: number) => {
    const { keyId, fingerprint } = (typeof item === 'object' && item !== null ? item : {}) as Record<string, unknown>;
    const print = typeof fingerprint === 'string' ? fingerprint.toLowerCase() : '';
    if (typeof keyId !== 'string' || !/^[0-9a-f]{16}$/.test(keyId) || !/^[0-9a-f]{64}$/.test(print) || !print.startsWith(keyId)) {
      fail(`keyRefresh.allowKeys[${i}] must be { keyId: 16 hex digits, fingerprint: the key's 64 hex digits, which begin with its key id }`);
    }
    return { keyId: keyId as string, fingerprint: print };
  });
  return { enabled: enabled === true, intervalMs: hours * 3_600_000, allowKeys: checked };
}

const BAD_KEY = 'public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY", or a list of them';

/** The key set of offline.publicKey, parsed once; a bad one fails with parseKeySet's reason. */
function keySetOrFail(input: unknown, fail: (message: string) => never): KeySet {
  // parseKeySet names a bad item of a list itself; anything else is not a key at all.
  if (typeof input !== 'string' && !(input instanceof Uint8Array) && !Array.isArray(input)) return fail(BAD_KEY);
  try {
    return parseKeySet(input as KeySetInput, 'offline.publicKey');
  } catch (error) {
    if (isLicenseServerError(error)) return fail(`${BAD_KEY}: ${error.message}`);
    return fail(BAD_KEY);
  }
}

function cacheDirOrFail(enabled: boolean, fail: (message: string) => never): string {
  try {
    return defaultCacheDir();
  } catch (error) {
    // os.homedir() throws where a user has neither $HOME nor a passwd entry (some containers).
    if (!enabled) return '';
    return fail(`cannot find the OS configuration directory (${error instanceof Error ? error.message : String(error)}); set offline.cacheDir`);
  }
}

/**
 * `license-server-client` in the OS configuration directory, much as Go's os.UserConfigDir finds
 * it for the spec's client: $XDG_CONFIG_HOME (when absolute, as the XDG spec requires) or
 * ~/.config on Linux and other Unixes, ~/Library/Application Support on macOS, %APPDATA% on
 * Windows. docs/client.md names the same paths (a test compares them).
 */
export function defaultCacheDir(): string {
  const home = homedir();
  switch (platform()) {
    case 'win32':
      // An empty APPDATA would make a relative path: a cache in whatever the working directory is.
      return path.join(process.env.APPDATA || path.join(home, 'AppData', 'Roaming'), 'license-server-client');
    case 'darwin':
      return path.join(home, 'Library', 'Application Support', 'license-server-client');
    default: {
      const xdg = process.env.XDG_CONFIG_HOME;
      return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(home, '.config'), 'license-server-client');
    }
  }
}

export const systemClock: Clock = {
  now: () => new Date(),
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    // A license check must never keep the application alive on its own.
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
