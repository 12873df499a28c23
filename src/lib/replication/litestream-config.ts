import { LicenseServerError } from '../errors.js';
import { formatInterval } from '../duration.js';
import { readCredential } from '../backup/targets/open.js';
import type { AgeKeyPair } from './age-identity.js';
import type { ReplicaTarget, ReplicationSettings } from './settings.js';

/** How often Litestream looks for new WAL pages to copy, at most: cheap (a stat and a read of what is new). */
const MONITOR_INTERVAL_MS = 250;

/** The directory (file target) or key prefix (s3 target) under a target's own that holds its replica. */
export const REPLICA_DIRECTORY = 'replica';

export interface LitestreamConfig {
  /** litestream.yml's text: no secret in it, only `${VAR}` references to `env`. */
  readonly yaml: string;
  /** What the child's environment must hold for those references: the secrets. */
  readonly env: Readonly<Record<string, string>>;
}

export interface LitestreamConfigInput {
  readonly databasePath: string;
  readonly replication: ReplicationSettings;
  /** Undefined: replicas unencrypted (every target allows it; settings.ts checked). */
  readonly age: AgeKeyPair | undefined;
  /** serve's process id: Litestream shuts down when it is gone, even after a SIGKILL. */
  readonly parentPid: number;
  /** Where the targets' `*_env` credentials are read. */
  readonly environment: Readonly<Record<string, string | undefined>>;
}

/**
 * Litestream 0.3's configuration for one database and its replicas. Secrets go to the child's
 * environment and the file refers to them as `${VAR}`, which Litestream expands when it
 * reads the file; so the file can be shown and leaks nothing. Since that expansion reaches
 * every `$` in the file, and has no escape, a non-secret value holding one is refused rather
 * than silently changed.
 */
export async function litestreamConfig(input: LitestreamConfigInput): Promise<LitestreamConfig> {
  const env: Record<string, string> = {};
  const secret = (name: string, value: string, what: string): string => {
    if (/['\r\n]/.test(value)) throw refused(`${what} holds a quote or a line break, which Litestream's configuration cannot carry`);
    env[name] = value;
    return `'\${${name}}'`;
  };
  const plain = (value: string | number | boolean, what: string): string => {
    if (typeof value === 'string' && value.includes('$')) throw refused(`${what} holds a "$", which Litestream would read as an environment variable`);
    return JSON.stringify(value);
  };
  const { replication } = input;
  const lines = [
    '# Written by license-server serve for the Litestream it runs; rewritten at each start.',
    // Litestream ends when its exec'd command does; this one ends when serve does, so that no
    // orphan replicates on after a killed serve, beside the next one's.
    `exec: ${plain(`tail --pid=${input.parentPid} -f /dev/null`, 'the exec command')}`,
    // Debug: the lines that say where each replica is (replica-position.ts), a few a second.
    'logging:',
    '  level: debug',
    '  type: json',
    '  stderr: true',
    'dbs:',
    `  - path: ${plain(input.databasePath, 'the database path')}`,
    // How often Litestream copies the WAL into its shadow WAL: its default, 1 s, adds up to a
    // second to every write's way to the replica, half of the window docs/replication.md gives.
    `    monitor-interval: ${formatInterval(Math.min(MONITOR_INTERVAL_MS, replication.syncIntervalMs))}`,
    // Litestream checkpoints the WAL itself; our connections leave it to (wal_autocheckpoint = 0).
    // No forced (RESTART) checkpoints: Litestream 0.3.13 copies the WAL, then checkpoints, and
    // writes made in between are checkpointed into the file and never copied, a gap in the
    // replica. A forced checkpoint waits for readers, so its window is long: the host-loss test
    // lost 0.5 s of writes in 2 of 14 rounds with it, none in 35 without (docs/replication.md).
    '    max-checkpoint-page-count: 0',
    '    replicas:',
  ];
  for (const [index, target] of replication.targets.entries()) {
    lines.push(...await replicaLines(target, index, { plain, secret, environment: input.environment }));
    lines.push(
      `        sync-interval: ${formatInterval(replication.syncIntervalMs)}`,
      `        snapshot-interval: ${formatInterval(replication.snapshotIntervalMs)}`,
      `        retention: ${formatInterval(replication.retentionMs)}`,
    );
    if (input.age) {
      lines.push(
        '        age:',
        `          identities: [${secret('LICENSE_REPLICA_AGE_IDENTITY', input.age.identity, 'the age identity')}]`,
        `          recipients: [${plain(input.age.recipient, 'the age recipient')}]`,
      );
    }
  }
  return { yaml: `${lines.join('\n')}\n`, env };
}

interface Writers {
  readonly plain: (value: string | number | boolean, what: string) => string;
  readonly secret: (name: string, value: string, what: string) => string;
  readonly environment: Readonly<Record<string, string | undefined>>;
}

async function replicaLines(target: ReplicaTarget, index: number, { plain, secret, environment }: Writers): Promise<string[]> {
  const what = (part: string) => `target ${target.name}'s ${part}`;
  switch (target.kind) {
    case 'file':
      return [
        `      - name: ${plain(target.name, what('name'))}`,
        '        type: file',
        `        path: ${plain(`${target.path}/${REPLICA_DIRECTORY}`, what('path'))}`,
      ];
    case 's3': {
      if (target.sessionToken) throw refused(`target ${target.name} uses a session token, which Litestream 0.3 cannot be given per replica; give it a key of its own to replicate`);
      const [accessKeyId, secretAccessKey] = await Promise.all([
        readCredential(target.name, 'the access key id', target.accessKeyId, environment),
        readCredential(target.name, 'the secret access key', target.secretAccessKey, environment),
      ]);
      return [
        `      - name: ${plain(target.name, what('name'))}`,
        '        type: s3',
        `        bucket: ${plain(target.bucket, what('bucket'))}`,
        `        path: ${plain(target.prefix === '' ? REPLICA_DIRECTORY : `${target.prefix}/${REPLICA_DIRECTORY}`, what('prefix'))}`,
        `        region: ${plain(target.region, what('region'))}`,
        ...(target.endpoint ? [`        endpoint: ${plain(target.endpoint, what('endpoint'))}`] : []),
        `        force-path-style: ${target.pathStyle}`,
        `        access-key-id: ${secret(`LICENSE_REPLICA_${index}_ACCESS_KEY_ID`, accessKeyId, what('access key id'))}`,
        `        secret-access-key: ${secret(`LICENSE_REPLICA_${index}_SECRET_ACCESS_KEY`, secretAccessKey, what('secret access key'))}`,
      ];
    }
  }
}

function refused(message: string): LicenseServerError {
  return new LicenseServerError('REPLICATION_UNAVAILABLE', message);
}
