import { LicenseServerError } from '../errors.js';
import type { FileTargetSettings, S3TargetSettings, TargetSettings } from '../backup/targets/settings.js';

/**
 * `backup.replication`: which off-site targets serve replicates the SQLite database to, by
 * Litestream, and how often. Only where and when: the targets' credentials stay named in
 * backup.targets, and the age identity comes from backup.encryption_key (age-identity.ts).
 */
export interface ReplicationSettings {
  readonly targets: readonly ReplicaTarget[];
  readonly syncIntervalMs: number;
  readonly snapshotIntervalMs: number;
  readonly retentionMs: number;
  /** The Litestream binary (LICENSE_LITESTREAM_BIN); undefined: the one npm installed. */
  readonly litestream: string | undefined;
}

export type ReplicaTarget = FileTargetSettings | S3TargetSettings;

export interface ReplicationInput {
  readonly targetNames: readonly string[];
  readonly syncIntervalMs: number;
  readonly snapshotIntervalMs: number;
  readonly retentionMs: number;
  readonly litestream: string | undefined;
  readonly targets: readonly TargetSettings[];
  /** The resolved database location: a SQLite path or a postgres:// URL. */
  readonly databaseUrl: string;
  readonly encrypted: boolean;
}

/**
 * Checks the replication settings against the rest of the configuration. Each refusal says
 * what to change; none shows a value that might be a secret.
 */
export function resolveReplication(input: ReplicationInput): ReplicationSettings {
  if (/^postgres(ql)?:\/\//i.test(input.databaseUrl)) {
    throw invalid('backup.replication.targets is for SQLite; with PostgreSQL, archive its WAL with pgBackRest instead (docs/replication.md, "PostgreSQL")');
  }
  const targets = input.targetNames.map((name) => {
    const target = input.targets.find((candidate) => candidate.name === name);
    if (!target) {
      const known = input.targets.map((candidate) => candidate.name);
      throw invalid(`backup.replication.targets names ${name}, which backup.targets does not list (${known.length > 0 ? `known: ${known.join(', ')}` : 'no targets are configured'})`);
    }
    if (target.kind === 'sftp') {
      throw invalid(`backup.replication.targets names ${name}, an sftp target: Litestream 0.3 does not check an SFTP server's host key, so replicas go only to file and s3 targets`);
    }
    if (!input.encrypted && !target.allowUnencrypted) {
      throw invalid(`backup.replication.targets names ${name}, but backup.encryption_key is not set: replicas are encrypted with an age key derived from it. Set the key, or allow_unencrypted: true on the target`);
    }
    return target;
  });
  if (input.snapshotIntervalMs > input.retentionMs) {
    throw invalid('backup.replication.snapshot_interval must not be longer than backup.replication.retention: a replica must keep a snapshot to restore from');
  }
  return {
    targets,
    syncIntervalMs: input.syncIntervalMs,
    snapshotIntervalMs: input.snapshotIntervalMs,
    retentionMs: input.retentionMs,
    litestream: input.litestream,
  };
}

function invalid(message: string): LicenseServerError {
  return new LicenseServerError('CONFIG_INVALID_VALUE', message);
}
