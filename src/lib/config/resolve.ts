import { statSync } from 'node:fs';
import path from 'node:path';
import { LicenseServerError } from '../errors.js';
import { describe } from '../validate.js';
import { ADMIN_TOKEN_MIN_LENGTH, SETTINGS, type SettingSpec } from './schema.js';
import { redactDatabaseUrl } from './redact.js';
import { readConfigFile } from './file.js';
import { describeFsError } from '../fs-errors.js';
import type { SmtpSettings } from '../notifications/email.js';
import { resolveSmtp } from './smtp.js';
import { formatInterval, parseDuration, parseInterval } from '../duration.js';
import { describeTarget, parseTargets, type TargetSettings } from '../backup/targets/settings.js';
import { resolveReplication, type ReplicationSettings } from '../replication/settings.js';

export interface Settings {
  readonly dataDir: string;
  readonly database: {
    readonly url: string;
    /** PostgreSQL, in seconds (0: no limit): storage/postgres-connection.ts. */
    readonly connectTimeout: number;
    readonly statementTimeout: number;
    readonly queryTimeout: number;
    /** serve: admin requests' statements, both engines (storage/admin-databases.ts). */
    readonly adminStatementTimeout: number;
  };
  readonly server: {
    readonly host: string;
    readonly port: number;
    readonly tlsCert: string | undefined;
    readonly tlsKey: string | undefined;
    /** Seconds. */
    readonly requestTimeout: number;
    readonly clientRateLimit: number;
    readonly clientRateBurst: number;
    /** Connections each listener holds at once, and from one client address (0: no limit). */
    readonly maxConnections: number;
    readonly maxConnectionsPerAddress: number;
    /** Seconds a starting daemon waits for a running restore. */
    readonly restoreWait: number;
    /** The listener that serves only GET /metrics, without a token; none when the port is unset. */
    readonly metricsHost: string;
    readonly metricsPort: number | undefined;
    /** server.metrics_store_refresh: seconds between background reads of the store's figures. */
    readonly metricsStoreRefresh: number;
  };
  readonly issuer: string;
  /** Activation requests (offline/request-checkout.ts): how long one may be checked out. */
  readonly offline: { readonly requestWindowDays: number };
  readonly grace: { readonly hours: number };
  /** Seals private signing keys at rest (signing-keys/protection.ts) when set. */
  readonly signing: { readonly keyEncryptionKey: Buffer | undefined };
  readonly notifications: {
    readonly allowLinkLocal: boolean;
    /** Undefined when notifications.smtp.host is unset: no email is sent. */
    readonly smtp: SmtpSettings | undefined;
    readonly retry: { readonly firstDelaySeconds: number; readonly maxDelaySeconds: number; readonly giveUpHours: number };
    readonly pruneAfterDays: number;
    /** Sorted descending, e.g. [30, 7, 1]. */
    readonly expiringSoonDays: readonly number[];
  };
  readonly adminToken: string | undefined;
  readonly backup: {
    readonly enabled: boolean;
    readonly schedule: string;
    readonly path: string;
    readonly encryptionKey: Buffer | undefined;
    readonly retentionDays: number;
    readonly keepDaily: number;
    readonly keepWeekly: number;
    readonly keepMonthly: number;
    /** Off-site targets (backup/targets/settings.ts); empty when none are configured. */
    readonly targets: readonly TargetSettings[];
    /** backup.max_age in ms: the daemon's backup.stale alert; undefined when unset. */
    readonly maxAgeMs: number | undefined;
    /** Continuous replication by Litestream (replication/settings.ts); undefined when no target replicates. */
    readonly replication: ReplicationSettings | undefined;
    /** serve's restore drills (backup/drill.ts); the schedule is a cron expression. */
    readonly drill: { readonly enabled: boolean; readonly schedule: string };
  };
}

export type SettingValue = string | number | boolean | Buffer | readonly TargetSettings[];

export interface ResolvedSetting {
  readonly key: string;
  readonly value: SettingValue | undefined;
  /** `flag --port`, `env LICENSE_PORT`, `file /etc/license-server/config.yaml` or `default`. */
  readonly source: string;
  readonly secret: boolean;
}

export interface ResolvedConfig {
  readonly settings: Settings;
  readonly entries: readonly ResolvedSetting[];
  readonly configFile: string | undefined;
  /**
   * The environment the configuration was resolved from (the adapter's process.env): where a
   * target's credentials named `*_env` are read when it is opened (backup/targets/open.ts).
   */
  readonly env: Readonly<Record<string, string | undefined>>;
}

export interface ConfigInputs {
  /** Flag values keyed by setting key (`server.port`), already typed by the CLI parser. */
  readonly flags?: Readonly<Record<string, string | number | boolean | undefined>>;
  /** Usually the process environment; only LICENSE_* names are read. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** --config; falls back to LICENSE_CONFIG, then <data_dir>/config.yaml when that exists. */
  readonly configPath?: string;
  readonly cwd: string;
}

interface RawValue {
  readonly raw: unknown;
  readonly source: string;
  /** Relative paths in this value resolve against this directory. */
  readonly baseDir: string;
}

/** Resolves every setting: flags, then LICENSE_* variables, then config.yaml, then defaults. */
export async function resolveConfig(inputs: ConfigInputs): Promise<ResolvedConfig> {
  const env = inputs.env ?? {};
  const flags = inputs.flags ?? {};

  const early = pick(specOf('data_dir'), flags, env, undefined, inputs.cwd);
  const earlyDataDir = early ? (convert(specOf('data_dir'), early) as string) : path.resolve(inputs.cwd, 'data');
  const configFile = locateConfigFile(inputs, env, earlyDataDir);
  const fileValues = configFile ? await readConfigFile(configFile) : undefined;

  const values = new Map<string, ResolvedSetting>();
  let dataDir = earlyDataDir;
  for (const spec of SETTINGS) {
    const found = pick(spec, flags, env, fileValues && { values: fileValues, file: configFile! }, inputs.cwd);
    let value: SettingValue | undefined;
    let source: string;
    if (found) {
      value = convert(spec, found);
      source = found.source;
    } else if (spec.default) {
      value = convert(spec, { raw: spec.default(dataDir), source: 'default', baseDir: inputs.cwd });
      source = 'default';
    } else {
      source = 'unset';
    }
    if (spec.key === 'data_dir') dataDir = value as string;
    values.set(spec.key, { key: spec.key, value, source, secret: spec.secret === true });
  }

  const get = <T extends SettingValue | undefined>(key: string): T => values.get(key)?.value as T;
  const settings: Settings = {
    dataDir: get('data_dir'),
    database: {
      url: get('database.url'),
      connectTimeout: get('database.connect_timeout'),
      statementTimeout: get('database.statement_timeout'),
      queryTimeout: get('database.query_timeout'),
      adminStatementTimeout: get('database.admin_statement_timeout'),
    },
    server: {
      host: get('server.host'),
      port: get('server.port'),
      tlsCert: get('server.tls_cert'),
      tlsKey: get('server.tls_key'),
      requestTimeout: get('server.request_timeout'),
      clientRateLimit: get('server.client_rate_limit'),
      clientRateBurst: get('server.client_rate_burst'),
      maxConnections: get('server.max_connections'),
      maxConnectionsPerAddress: get('server.max_connections_per_address'),
      restoreWait: get('server.restore_wait'),
      metricsHost: get('server.metrics_host'),
      metricsPort: get('server.metrics_port'),
      metricsStoreRefresh: get('server.metrics_store_refresh'),
    },
    issuer: get('issuer'),
    offline: { requestWindowDays: get('offline.request_window_days') },
    grace: { hours: get('grace.hours') },
    signing: { keyEncryptionKey: get('signing.key_encryption_key') },
    notifications: {
      allowLinkLocal: get('notifications.allow_link_local'),
      smtp: resolveSmtp(values),
      retry: {
        firstDelaySeconds: get('notifications.retry_first_delay'),
        maxDelaySeconds: get('notifications.retry_max_delay'),
        giveUpHours: get('notifications.give_up_after'),
      },
      pruneAfterDays: get('notifications.prune_after_days'),
      expiringSoonDays: parseDayList(get<string>('notifications.expiring_soon_days'))!,
    },
    adminToken: get('admin_token'),
    backup: {
      enabled: get('backup.enabled'),
      schedule: get('backup.schedule'),
      path: get('backup.path'),
      encryptionKey: get('backup.encryption_key'),
      retentionDays: get('backup.retention_days'),
      keepDaily: get('backup.keep_daily'),
      keepWeekly: get('backup.keep_weekly'),
      keepMonthly: get('backup.keep_monthly'),
      targets: get<readonly TargetSettings[] | undefined>('backup.targets') ?? [],
      maxAgeMs: get<string | undefined>('backup.max_age') === undefined ? undefined : parseDuration(get<string>('backup.max_age'), 'backup.max_age'),
      replication: get<string | undefined>('backup.replication.targets') === undefined ? undefined : resolveReplication({
        targetNames: get<string>('backup.replication.targets').split(','),
        syncIntervalMs: parseInterval(get('backup.replication.sync_interval'))!,
        snapshotIntervalMs: parseInterval(get('backup.replication.snapshot_interval'))!,
        retentionMs: parseInterval(get('backup.replication.retention'))!,
        litestream: get('backup.replication.litestream'),
        targets: get<readonly TargetSettings[] | undefined>('backup.targets') ?? [],
        databaseUrl: get('database.url'),
        encrypted: get('backup.encryption_key') !== undefined,
      }),
      drill: { enabled: get('backup.drill.enabled'), schedule: get('backup.drill.schedule') },
    },
  };
  if ((settings.server.tlsCert === undefined) !== (settings.server.tlsKey === undefined)) {
    const [given, missing] = settings.server.tlsCert === undefined ? ['server.tls_key', 'server.tls_cert'] : ['server.tls_cert', 'server.tls_key'];
    throw new LicenseServerError('CONFIG_INVALID_VALUE', `${given} is set (from ${values.get(given)!.source}) but ${missing} is not; HTTPS needs both`);
  }
  const schedule = values.get('backup.schedule')!;
  if (schedule.source !== 'default') await checkCronExpression(String(schedule.value), `backup.schedule (from ${schedule.source})`);
  const drillSchedule = values.get('backup.drill.schedule')!;
  if (drillSchedule.source !== 'default') await checkCronExpression(String(drillSchedule.value), `backup.drill.schedule (from ${drillSchedule.source})`);
  return { settings, entries: [...values.values()], configFile, env };
}

/** Parses a cron expression fully (cron-parser is loaded only for a non-default one). */
export async function checkCronExpression(expression: string, what: string): Promise<void> {
  const { CronExpressionParser } = await import('cron-parser');
  try {
    CronExpressionParser.parse(expression);
  } catch (error) {
    throw new LicenseServerError('CONFIG_INVALID_VALUE', `${what} is not a valid cron expression: ${(error as Error).message}`);
  }
}

/** The effective settings as shown to an operator: secrets and URL passwords redacted. */
export function displayEntries(config: ResolvedConfig): Array<{ key: string; value: string | null; source: string }> {
  return config.entries.map((entry) => {
    let shown: string | null;
    if (entry.value === undefined) shown = null;
    else if (entry.secret) shown = '[redacted]';
    else if (entry.key === 'database.url') shown = redactDatabaseUrl(String(entry.value));
    else if (Array.isArray(entry.value)) shown = (entry.value as readonly TargetSettings[]).map(describeTargetSettings).join('; ');
    else shown = String(entry.value);
    return { key: entry.key, value: shown, source: entry.source };
  });
}

/** A target as `config show` lists it: where it is, and whether unencrypted backups go there and come back from it. */
function describeTargetSettings(target: TargetSettings): string {
  return `${describeTarget(target)}${target.allowUnencrypted ? ' (allow_unencrypted: unencrypted backups are copied there and restored from there)' : ''}`;
}

/**
 * Where database.url came from, in words for an operator who is looking at the wrong store:
 * the variable, flag or file that set it, or the default relative to the working directory.
 */
export function describeDatabaseOrigin(config: ResolvedConfig): string {
  const entry = (key: string) => config.entries.find((candidate) => candidate.key === key)!;
  const url = entry('database.url');
  if (url.source !== 'default') return `database.url from ${url.source}`;
  const dataDir = entry('data_dir');
  if (dataDir.source !== 'default') return `<data_dir>/license-server.db, data_dir from ${dataDir.source}`;
  return `the default ./data/license-server.db, relative to the working directory ${path.dirname(String(dataDir.value))}`;
}

function specOf(key: string): SettingSpec {
  const spec = SETTINGS.find((candidate) => candidate.key === key);
  if (!spec) throw new Error(`no setting ${key}`);
  return spec;
}

function locateConfigFile(inputs: ConfigInputs, env: ConfigInputs['env'] & object, dataDir: string): string | undefined {
  const explicit = inputs.configPath ?? nonEmpty(env.LICENSE_CONFIG);
  if (explicit !== undefined) {
    const resolved = path.resolve(inputs.cwd, explicit);
    const origin = inputs.configPath !== undefined ? 'flag --config' : 'env LICENSE_CONFIG';
    try {
      if (!statSync(resolved).isFile()) throw new Error('not a regular file');
    } catch (error) {
      throw new LicenseServerError(
        'CONFIG_FILE_UNREADABLE',
        `cannot read the configuration file ${resolved} (from ${origin}): ${describeFsError(error)}`,
      );
    }
    return resolved;
  }
  const implicit = path.join(dataDir, 'config.yaml');
  try {
    return statSync(implicit).isFile() ? implicit : undefined;
  } catch {
    return undefined;
  }
}

function pick(
  spec: SettingSpec,
  flags: NonNullable<ConfigInputs['flags']>,
  env: NonNullable<ConfigInputs['env']>,
  file: { values: ReadonlyMap<string, unknown>; file: string } | undefined,
  cwd: string,
): RawValue | undefined {
  const flagValue = flags[spec.key];
  if (flagValue !== undefined && spec.flag) {
    return { raw: flagValue, source: `flag --${spec.flag}`, baseDir: cwd };
  }
  const envValue = nonEmpty(env[spec.env]);
  if (envValue !== undefined) return { raw: envValue, source: `env ${spec.env}`, baseDir: cwd };
  if (file && file.values.has(spec.key)) {
    const raw = file.values.get(spec.key);
    if (raw !== null && raw !== undefined) {
      return { raw, source: `file ${file.file}`, baseDir: path.dirname(file.file) };
    }
  }
  return undefined;
}

function convert(spec: SettingSpec, found: RawValue): SettingValue {
  const { raw, source } = found;
  const fromText = typeof raw === 'string' && !source.startsWith('file');
  const invalid = (expected: string, showValue = true): never => {
    const shown = showValue && !spec.secret ? `, got ${describe(raw)}` : '; the value is not shown';
    throw new LicenseServerError('CONFIG_INVALID_VALUE', `${spec.key} must be ${expected}${shown} (from ${source})`);
  };
  switch (spec.type) {
    case 'string': {
      if (typeof raw !== 'string' || raw.trim() === '') return invalid('a non-empty string');
      if (spec.key === 'admin_token' && raw.length < ADMIN_TOKEN_MIN_LENGTH) {
        return invalid(`at least ${ADMIN_TOKEN_MIN_LENGTH} characters long`);
      }
      return raw;
    }
    case 'path': {
      if (typeof raw !== 'string' || raw.trim() === '') return invalid('a path');
      return path.resolve(found.baseDir, raw);
    }
    case 'database-url': {
      if (typeof raw !== 'string' || raw.trim() === '') return invalid('a SQLite file path or a postgres:// URL');
      if (/^postgres(ql)?:\/\//i.test(raw)) {
        try {
          new URL(raw);
        } catch {
          return invalid('a valid postgres:// URL', false);
        }
        return raw;
      }
      const sqlitePath = raw.startsWith('sqlite:') ? raw.slice('sqlite:'.length) : raw;
      if (/^[a-z][a-z0-9+.-]*:\/\//i.test(sqlitePath) || sqlitePath === '') {
        return invalid('a SQLite file path or a postgres:// URL', false);
      }
      return path.resolve(found.baseDir, sqlitePath);
    }
    case 'integer': {
      let value: number;
      if (typeof raw === 'number') value = raw;
      else if (fromText && /^-?\d+$/.test(String(raw).trim())) value = Number(String(raw).trim());
      else return invalid(`an integer from ${spec.min} to ${spec.max}`);
      if (!Number.isSafeInteger(value) || value < (spec.min ?? -Infinity) || value > (spec.max ?? Infinity)) {
        return invalid(`an integer from ${spec.min} to ${spec.max}`);
      }
      return value;
    }
    case 'boolean': {
      if (typeof raw === 'boolean') return raw;
      if (fromText) {
        const text = String(raw).trim().toLowerCase();
        if (['true', '1', 'yes', 'on'].includes(text)) return true;
        if (['false', '0', 'no', 'off'].includes(text)) return false;
      }
      return invalid('true or false');
    }
    case 'cron': {
      // Checked for shape here; the daemon parses it fully at start (checkCronExpression).
      if (typeof raw !== 'string' || !/^\S+(\s+\S+){4,5}$/.test(raw.trim())) return invalid('a cron expression such as "0 2 * * *"');
      return raw.trim();
    }
    case 'choice': {
      const choices = spec.choices ?? [];
      const text = typeof raw === 'string' ? raw.trim().toLowerCase() : undefined;
      if (text === undefined || !choices.includes(text)) return invalid(`one of ${choices.join(', ')}`);
      return text;
    }
    case 'day-list': {
      // YAML may give a single number (7) or a list ([30, 7, 1]) as well as the text form.
      const text = typeof raw === 'number' ? String(raw) : Array.isArray(raw) ? raw.join(',') : raw;
      const days = typeof text === 'string' ? parseDayList(text) : undefined;
      if (!days) return invalid('distinct whole days from 1 to 365, comma-separated, such as "30,7,1"');
      return days.join(',');
    }
    case 'target-list':
      return parseTargets(raw, source, found.baseDir);
    case 'interval': {
      const ms = typeof raw === 'string' ? parseInterval(raw) : undefined;
      if (ms === undefined || ms < (spec.min ?? 0) || ms > (spec.max ?? Infinity)) {
        return invalid(`a whole number with a unit ms, s, m or h, from ${formatInterval(spec.min ?? 0)} to ${formatInterval(spec.max ?? 0)}, such as 1s or 6h`);
      }
      return (raw as string).trim();
    }
    case 'name-list': {
      const names = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',').map((name) => name.trim()).filter((name) => name !== '') : undefined;
      if (!names || names.length === 0 || !names.every((name) => typeof name === 'string' && /^[a-z0-9][a-z0-9_-]{0,31}$/.test(name))) {
        return invalid('one or more target names, as a list or comma-separated');
      }
      if (new Set(names).size !== names.length) return invalid('distinct target names');
      return names.join(',');
    }
    case 'duration': {
      if (typeof raw !== 'string' || !/^\d{1,5}[hdwy]$/.test(raw.trim())) return invalid('a whole number with a unit h, d, w or y, such as 26h');
      return raw.trim();
    }
    case 'backup-key': {
      if (typeof raw !== 'string') return invalid('32 bytes given as 64 hex digits or as Base64', false);
      const key = decodeKey(raw.trim());
      if (!key) return invalid('32 bytes given as 64 hex digits or as Base64', false);
      return key;
    }
  }
}

/** "30, 7,1" -> [30, 7, 1]: distinct whole days 1-365, sorted descending; undefined if not that. */
export function parseDayList(text: string): number[] | undefined {
  const parts = text.split(',').map((part) => part.trim());
  if (!parts.every((part) => /^\d{1,3}$/.test(part))) return undefined;
  const days = parts.map(Number);
  if (days.some((day) => day < 1 || day > 365) || new Set(days).size !== days.length) return undefined;
  return days.sort((a, b) => b - a);
}

/** 64 hex digits, or standard/URL-safe Base64 of exactly 32 bytes. */
export function decodeKey(text: string): Buffer | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const key = Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length === 32) return key;
  }
  return undefined;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

