import path from 'node:path';
import { LicenseServerError } from '../../errors.js';
import { describe } from '../../validate.js';
import type { TargetKind } from './target.js';

/**
 * `backup.targets`: the off-site targets as config.yaml lists them, or the same list as JSON
 * in LICENSE_BACKUP_TARGETS (docs/configuration.md, "Off-site targets"). Only where and how:
 * a credential is never written here, only the name of the environment variable or file
 * that holds it (`*_env`, `*_file`), read when the target is opened (open.ts). So the list is
 * safe to show in `config show`, to log, and to carry in a backup's copy of config.yaml.
 */
export interface TargetRetention {
  readonly retentionDays?: number;
  readonly keepDaily?: number;
  readonly keepWeekly?: number;
  readonly keepMonthly?: number;
}

/** Where a credential comes from: an environment variable's name, or a file's path. */
export type CredentialSource = { readonly env: string } | { readonly file: string };

interface CommonSettings {
  readonly name: string;
  readonly kind: TargetKind;
  /** Copy unencrypted backups here too (they hold customer data and maybe unsealed signing keys). */
  readonly allowUnencrypted: boolean;
  /** Seconds without an answer before the target counts as down. */
  readonly timeoutSeconds: number;
  /** Overrides of the local keep rules (backup.retention_days, backup.keep_*) for this target. */
  readonly retention: TargetRetention;
}

export interface FileTargetSettings extends CommonSettings {
  readonly kind: 'file';
  readonly path: string;
}

export interface S3TargetSettings extends CommonSettings {
  readonly kind: 's3';
  readonly endpoint: string | undefined;
  readonly region: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly pathStyle: boolean;
  readonly serverSideEncryption: 'AES256' | 'aws:kms' | undefined;
  readonly kmsKeyId: string | undefined;
  readonly accessKeyId: CredentialSource;
  readonly secretAccessKey: CredentialSource;
  readonly sessionToken: CredentialSource | undefined;
  readonly partSizeMiB: number;
}

export interface SftpTargetSettings extends CommonSettings {
  readonly kind: 'sftp';
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly path: string;
  readonly privateKeyFile: string;
  readonly passphrase: CredentialSource | undefined;
  readonly hostKeyFingerprints: readonly string[];
  readonly knownHostsFile: string | undefined;
}

export type TargetSettings = FileTargetSettings | S3TargetSettings | SftpTargetSettings;

const NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const COMMON_KEYS = ['name', 'kind', 'allow_unencrypted', 'timeout', 'retention_days', 'keep_daily', 'keep_weekly', 'keep_monthly'];
const KIND_KEYS: Record<TargetKind, readonly string[]> = {
  file: ['path'],
  s3: ['endpoint', 'region', 'bucket', 'prefix', 'path_style', 'sse', 'sse_kms_key_id', 'access_key_id_env', 'access_key_id_file',
    'secret_access_key_env', 'secret_access_key_file', 'session_token_env', 'session_token_file', 'part_size_mib'],
  sftp: ['host', 'port', 'user', 'path', 'private_key_file', 'private_key_passphrase_env', 'private_key_passphrase_file', 'host_key_fingerprint', 'known_hosts_file'],
};
/** Keys that would put a credential in the file itself: refused with a pointer to the _env and _file forms. */
const INLINE_SECRETS = ['access_key_id', 'secret_access_key', 'session_token', 'password', 'private_key', 'private_key_passphrase', 'passphrase'];

/**
 * Parses and checks the list. `raw` is what YAML gave (a list of mappings) or, from the
 * environment, its JSON text; relative paths resolve against `baseDir`. Every problem names
 * the target and the key, never a value that might be a secret.
 */
export function parseTargets(raw: unknown, source: string, baseDir: string): TargetSettings[] {
  let list = raw;
  if (typeof raw === 'string') {
    try {
      list = JSON.parse(raw);
    } catch {
      throw invalid(`backup.targets must be a JSON list of targets (from ${source}); it does not parse as JSON`);
    }
  }
  if (!Array.isArray(list)) throw invalid(`backup.targets must be a list of targets (from ${source})`);
  const names = new Set<string>();
  return list.map((entry, index) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw invalid(`backup.targets[${index}] must be a mapping with name and kind (from ${source})`);
    }
    const target = parseTarget(entry as Record<string, unknown>, index, source, baseDir);
    if (names.has(target.name)) throw invalid(`backup.targets names ${target.name} twice (from ${source})`);
    names.add(target.name);
    return target;
  });
}

function parseTarget(entry: Record<string, unknown>, index: number, source: string, baseDir: string): TargetSettings {
  const name = entry.name;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw invalid(`backup.targets[${index}].name must be 1-32 lowercase letters, digits, "_" or "-", starting with a letter or digit (from ${source})`);
  }
  const where = `backup.targets ${name}`;
  const kind = entry.kind;
  if (kind !== 'file' && kind !== 's3' && kind !== 'sftp') throw invalid(`${where}: kind must be file, s3 or sftp (from ${source})`);
  for (const key of Object.keys(entry)) {
    if (INLINE_SECRETS.includes(key)) {
      throw invalid(`${where}: ${key} may not be written in the configuration; name the environment variable (${key}_env) or the file (${key}_file) that holds it (from ${source})`);
    }
    if (!COMMON_KEYS.includes(key) && !KIND_KEYS[kind].includes(key)) {
      throw new LicenseServerError('CONFIG_UNKNOWN_KEY', `${where}: unknown key ${describe(key)} for kind ${kind} (known: ${[...COMMON_KEYS, ...KIND_KEYS[kind]].join(', ')}) (from ${source})`);
    }
  }
  const field = fieldReader(entry, where, source, baseDir);
  const common = {
    name,
    allowUnencrypted: field.boolean('allow_unencrypted', false),
    timeoutSeconds: field.integer('timeout', 1, 3600, 30)!,
    retention: {
      ...optional('retentionDays', field.integer('retention_days', 1, 36500)),
      ...optional('keepDaily', field.integer('keep_daily', 0, 3650)),
      ...optional('keepWeekly', field.integer('keep_weekly', 0, 520)),
      ...optional('keepMonthly', field.integer('keep_monthly', 0, 1200)),
    },
  };
  switch (kind) {
    case 'file':
      return { ...common, kind, path: field.absolutePath('path', true)! };
    case 's3': {
      const endpoint = field.string('endpoint');
      if (endpoint !== undefined && !/^https?:\/\/[^/?#\s]+\/?$/i.test(endpoint)) {
        throw invalid(`${where}: endpoint must be an http:// or https:// URL with a host and no path, such as https://s3.eu-central-003.backblazeb2.com (from ${source})`);
      }
      if (endpoint !== undefined && /^https?:\/\/[^/@]*@/i.test(endpoint)) throw invalid(`${where}: endpoint may not hold credentials (from ${source})`);
      const bucket = field.string('bucket', true)!;
      if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) throw invalid(`${where}: bucket must be a valid S3 bucket name (3-63 lowercase letters, digits, "." and "-") (from ${source})`);
      const prefix = (field.string('prefix') ?? '').replace(/^\/+|\/+$/g, '');
      if (/\.\.|\/\//.test(prefix)) throw invalid(`${where}: prefix may not hold ".." or an empty segment (from ${source})`);
      const sse = field.string('sse');
      if (sse !== undefined && sse !== 'AES256' && sse !== 'aws:kms') throw invalid(`${where}: sse must be AES256 or aws:kms (from ${source})`);
      const kmsKeyId = field.string('sse_kms_key_id');
      if (kmsKeyId !== undefined && sse !== 'aws:kms') throw invalid(`${where}: sse_kms_key_id needs sse: aws:kms (from ${source})`);
      return {
        ...common,
        kind,
        endpoint: endpoint?.replace(/\/$/, ''),
        region: field.string('region') ?? 'us-east-1',
        bucket,
        prefix,
        pathStyle: field.boolean('path_style', false),
        serverSideEncryption: sse,
        kmsKeyId,
        accessKeyId: field.credential('access_key_id', { env: 'AWS_ACCESS_KEY_ID' })!,
        secretAccessKey: field.credential('secret_access_key', { env: 'AWS_SECRET_ACCESS_KEY' })!,
        sessionToken: field.credential('session_token'),
        partSizeMiB: field.integer('part_size_mib', 5, 512, 16)!,
      };
    }
    case 'sftp': {
      const fingerprints = field.fingerprints('host_key_fingerprint');
      const knownHostsFile = field.absolutePath('known_hosts_file');
      if (fingerprints.length > 0 && knownHostsFile !== undefined) {
        throw invalid(`${where}: give the server's host key one way, host_key_fingerprint or known_hosts_file, not both (from ${source})`);
      }
      if (fingerprints.length === 0 && knownHostsFile === undefined) {
        throw invalid(`${where}: give the server's host key, as host_key_fingerprint ("SHA256:...", from ssh-keygen -lf) or known_hosts_file; an unknown host key is never accepted (from ${source})`);
      }
      const remote = field.string('path', true)!;
      if (!remote.startsWith('/')) throw invalid(`${where}: path must be an absolute directory on the server (from ${source})`);
      return {
        ...common,
        kind,
        host: field.string('host', true)!,
        port: field.integer('port', 1, 65535, 22)!,
        user: field.string('user', true)!,
        path: remote.replace(/\/+$/, '') || '/',
        privateKeyFile: field.absolutePath('private_key_file', true)!,
        passphrase: field.credential('private_key_passphrase'),
        hostKeyFingerprints: fingerprints,
        knownHostsFile,
      };
    }
  }
}

function fieldReader(entry: Record<string, unknown>, where: string, source: string, baseDir: string) {
  const fail = (key: string, expected: string) => invalid(`${where}: ${key} must be ${expected} (from ${source})`);
  const present = (key: string) => entry[key] !== undefined && entry[key] !== null;
  const reader = {
    string(key: string, required = false): string | undefined {
      if (!present(key)) {
        if (required) throw invalid(`${where}: ${key} is required (from ${source})`);
        return undefined;
      }
      const value = entry[key];
      if (typeof value !== 'string' || value.trim() === '' || /[\u0000-\u001f]/.test(value)) throw fail(key, 'a non-empty string');
      return value.trim();
    },
    boolean(key: string, fallback: boolean): boolean {
      if (!present(key)) return fallback;
      if (typeof entry[key] !== 'boolean') throw fail(key, 'true or false');
      return entry[key] as boolean;
    },
    integer(key: string, min: number, max: number, fallback?: number): number | undefined {
      if (!present(key)) return fallback;
      const value = entry[key];
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) throw fail(key, `an integer from ${min} to ${max}`);
      return value;
    },
    absolutePath(key: string, required = false): string | undefined {
      const value = reader.string(key, required);
      return value === undefined ? undefined : path.resolve(baseDir, value);
    },
    credential(base: string, fallback?: CredentialSource): CredentialSource | undefined {
      const env = reader.string(`${base}_env`);
      const file = reader.absolutePath(`${base}_file`);
      if (env !== undefined && file !== undefined) throw invalid(`${where}: give one of ${base}_env and ${base}_file (from ${source})`);
      if (env !== undefined && !ENV_NAME.test(env)) throw fail(`${base}_env`, 'the name of an environment variable');
      if (env !== undefined) return { env };
      if (file !== undefined) return { file };
      return fallback;
    },
    fingerprints(key: string): string[] {
      if (!present(key)) return [];
      const value = entry[key];
      const list = Array.isArray(value) ? value : [value];
      return list.map((item) => {
        if (typeof item !== 'string' || !/^SHA256:[A-Za-z0-9+/]{43}=?$/.test(item.trim())) {
          throw fail(key, 'a host key fingerprint as ssh-keygen -lf prints it ("SHA256:" and 43 Base64 characters), or a list of them');
        }
        return item.trim().replace(/=$/, '');
      });
    },
  };
  return reader;
}

function optional<K extends string>(key: K, value: number | undefined): { [P in K]?: number } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: number };
}

function invalid(message: string): LicenseServerError {
  return new LicenseServerError('CONFIG_INVALID_VALUE', message);
}

/** One line per target for `config show` and logs: kind and where, never a credential. */
export function describeTarget(target: TargetSettings): string {
  switch (target.kind) {
    case 'file':
      return `${target.name}: file ${target.path}`;
    case 's3':
      return `${target.name}: s3://${target.bucket}${target.prefix ? `/${target.prefix}` : ''}${target.endpoint ? ` at ${target.endpoint}` : ''}`;
    case 'sftp':
      return `${target.name}: sftp://${target.user}@${target.host}:${target.port}${target.path}`;
  }
}

/** The keep rules a target applies: its own, and the local ones (backup.retention_days, keep_*) where it sets none. */
export function targetRetention(target: TargetSettings, local: { readonly retentionDays: number; readonly keepDaily: number; readonly keepWeekly: number; readonly keepMonthly: number }) {
  return {
    retentionDays: target.retention.retentionDays ?? local.retentionDays,
    keepDaily: target.retention.keepDaily ?? local.keepDaily,
    keepWeekly: target.retention.keepWeekly ?? local.keepWeekly,
    keepMonthly: target.retention.keepMonthly ?? local.keepMonthly,
  };
}
