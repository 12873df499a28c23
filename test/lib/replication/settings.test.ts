import assert from 'node:assert/strict';
import { hkdfSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { x25519 } from '@noble/curves/ed25519.js';
import { bech32 } from '@scure/base';
import { resolveConfig } from '../../../src/lib/config/resolve.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { replicaAgeKeys } from '../../../src/lib/replication/age-identity.js';
import { litestreamConfig } from '../../../src/lib/replication/litestream-config.js';
import { holds, parsePosition, readLogLine } from '../../../src/lib/replication/replica-position.js';

const KEY = '07'.repeat(32);

describe('replication settings (backup.replication)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-replication-settings-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const file = { name: 'offsite', kind: 'file', path: '/mnt/offsite' };
  const s3 = { name: 'cloud', kind: 's3', bucket: 'acme-backups', endpoint: 'http://127.0.0.1:9000', path_style: true, access_key_id_env: 'CLOUD_ID', secret_access_key_env: 'CLOUD_SECRET' };
  const sftp = { name: 'nas', kind: 'sftp', host: 'nas', user: 'backup', path: '/backups', private_key_file: '/k', host_key_fingerprint: `SHA256:${'A'.repeat(43)}` };
  const resolve = (env: Record<string, string>) => resolveConfig({ cwd: dir, env: { LICENSE_DATA_DIR: dir, ...env } });
  const refused = async (env: Record<string, string>, pattern: RegExp) => {
    await assert.rejects(resolve(env), (error: unknown) => {
      assert.ok(error instanceof LicenseServerError, String(error));
      assert.equal(error.code, 'CONFIG_INVALID_VALUE', error.message);
      assert.match(error.message, pattern);
      assert.ok(!error.message.includes(KEY), 'the backup key is not shown');
      return true;
    });
  };

  it('are read from config.yaml, with their defaults', async () => {
    const config = path.join(dir, 'config.yaml');
    writeFileSync(config, `backup:\n  encryption_key: "${KEY}"\n  targets:\n    - name: offsite\n      kind: file\n      path: /mnt/offsite\n  replication:\n    targets: [offsite]\n    sync_interval: 500ms\n`);
    const { settings } = await resolveConfig({ cwd: dir, configPath: config, env: {} });
    assert.deepEqual(settings.backup.replication, {
      targets: [settings.backup.targets[0]],
      syncIntervalMs: 500,
      snapshotIntervalMs: 6 * 3_600_000,
      retentionMs: 168 * 3_600_000,
      litestream: undefined,
    });
    rmSync(config);
    assert.equal((await resolve({})).settings.backup.replication, undefined);
  });

  it('refuse PostgreSQL, an unknown or sftp target, a target that would get plain replicas, and bad intervals', async () => {
    const targets = JSON.stringify([file, sftp]);
    await refused({ LICENSE_DATABASE_URL: 'postgres://127.0.0.1/x', LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_BACKUP_TARGETS: targets, LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite' }, /is for SQLite; with PostgreSQL, archive its WAL with pgBackRest/);
    await refused({ LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_BACKUP_TARGETS: targets, LICENSE_BACKUP_REPLICATION_TARGETS: 'elsewhere' }, /names elsewhere, which backup.targets does not list \(known: offsite, nas\)/);
    await refused({ LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_BACKUP_TARGETS: targets, LICENSE_BACKUP_REPLICATION_TARGETS: 'nas' }, /an sftp target: Litestream 0.3 does not check an SFTP server's host key/);
    await refused({ LICENSE_BACKUP_TARGETS: targets, LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite' }, /backup.encryption_key is not set/);
    await refused({ LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_BACKUP_TARGETS: targets, LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite', LICENSE_BACKUP_REPLICATION_SYNC_INTERVAL: '50ms' }, /sync_interval must be a whole number with a unit ms, s, m or h, from 100ms to 1h/);
    await refused({ LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_BACKUP_TARGETS: targets, LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite', LICENSE_BACKUP_REPLICATION_SNAPSHOT_INTERVAL: '48h', LICENSE_BACKUP_REPLICATION_RETENTION: '24h' }, /snapshot_interval must not be longer than backup.replication.retention/);
    await refused({ LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_BACKUP_TARGETS: targets, LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite,offsite' }, /distinct target names/);
    // allow_unencrypted on the target lets it replicate without a key.
    const plain = await resolve({ LICENSE_BACKUP_TARGETS: JSON.stringify([{ ...file, allow_unencrypted: true }]), LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite' });
    assert.equal(plain.settings.backup.replication?.targets[0]?.name, 'offsite');
  });

  it('derive the age key pair from the backup key as docs/replication.md states it, with its vector', () => {
    const doc = readFileSync(new URL('../../../docs/replication.md', import.meta.url), 'utf8');
    const vector = replicaAgeKeys(Buffer.from(KEY, 'hex'));
    assert.ok(doc.includes(vector.identity) && doc.includes(vector.recipient), 'the document quotes the vector');
    // Recomputed from the document with node:crypto's HKDF, not the module's.
    const key = randomBytes(32);
    const scalar = Buffer.from(hkdfSync('sha256', key, 'license-server replication', 'age X25519 identity v1', 32));
    assert.deepEqual(replicaAgeKeys(key), {
      identity: bech32.encode('age-secret-key-', bech32.toWords(scalar), false).toUpperCase(),
      recipient: bech32.encode('age', bech32.toWords(x25519.getPublicKey(scalar)), false),
    });
  });

  it('write a Litestream configuration with every secret in the environment, and refuse what Litestream would misread', async () => {
    const { settings } = await resolve({ LICENSE_BACKUP_ENCRYPTION_KEY: KEY, LICENSE_BACKUP_TARGETS: JSON.stringify([file, s3]), LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite,cloud' });
    const age = replicaAgeKeys(Buffer.from(KEY, 'hex'));
    const written = await litestreamConfig({ databasePath: '/var/lib/ls/license-server.db', replication: settings.backup.replication!, age, parentPid: 42, environment: { CLOUD_ID: 'AKIDEXAMPLE', CLOUD_SECRET: 'wJalr/K7MDENG+bPxRfiCY' } });
    assert.deepEqual(written.env, { LICENSE_REPLICA_AGE_IDENTITY: age.identity, LICENSE_REPLICA_1_ACCESS_KEY_ID: 'AKIDEXAMPLE', LICENSE_REPLICA_1_SECRET_ACCESS_KEY: 'wJalr/K7MDENG+bPxRfiCY' });
    for (const secret of Object.values(written.env)) assert.ok(!written.yaml.includes(secret), 'a secret is in the file');
    assert.match(written.yaml, /exec: "tail --pid=42 -f \/dev\/null"/);
    assert.match(written.yaml, /path: "\/mnt\/offsite\/replica"/);
    assert.match(written.yaml, /bucket: "acme-backups"\n {8}path: "replica"/);
    assert.match(written.yaml, /access-key-id: '\$\{LICENSE_REPLICA_1_ACCESS_KEY_ID\}'/);
    const refusedBy = async (databasePath: string, environment: Record<string, string>, pattern: RegExp) => {
      await assert.rejects(litestreamConfig({ databasePath, replication: settings.backup.replication!, age, parentPid: 42, environment }), (error: unknown) => {
        assert.ok(error instanceof LicenseServerError && error.code === 'REPLICATION_UNAVAILABLE', String(error));
        assert.match(error.message, pattern);
        assert.ok(!error.message.includes("it's"), 'the secret is not shown');
        return true;
      });
    };
    await refusedBy('/var/lib/$HOME/license-server.db', { CLOUD_ID: 'a', CLOUD_SECRET: 'b' }, /the database path holds a "\$"/);
    await refusedBy('/var/lib/ls.db', { CLOUD_ID: 'a', CLOUD_SECRET: "it's" }, /target cloud's secret access key holds a quote or a line break/);
  });

  it('read where each replica is from Litestream\'s log lines', () => {
    const line = (fields: object) => JSON.stringify({ time: '2026-11-29T17:46:41Z', level: 'INFO', db: '/x.db', ...fields });
    assert.deepEqual(readLogLine(line({ msg: 'wal segment written', replica: 'offsite', position: 'd998cca53990428e/00000000:16512', elapsed: '16ms', sz: 4120 })),
      { kind: 'written', replica: 'offsite', position: { generation: 'd998cca53990428e', index: 0, offset: 20632 } });
    assert.deepEqual(readLogLine(line({ level: 'DEBUG', msg: 'replica sync: calc new pos', replica: 'offsite', position: 'd998cca53990428e/0000000a:32' })),
      { kind: 'replica-found', replica: 'offsite', position: { generation: 'd998cca53990428e', index: 10, offset: 32 } });
    assert.deepEqual(readLogLine(line({ level: 'DEBUG', msg: 'sync: ok' })), { kind: 'database-synced' });
    assert.deepEqual(readLogLine(line({ level: 'ERROR', msg: 'monitor error', replica: 'offsite', error: 'mkdir /mnt: permission denied' })),
      { kind: 'error', replica: 'offsite', message: 'monitor error: mkdir /mnt: permission denied' });
    assert.equal(readLogLine('panic: runtime error'), undefined);
    const at = parsePosition('d998cca53990428e/00000001:100')!;
    assert.ok(holds(at, at));
    assert.ok(holds({ ...at, index: 2, offset: 0 }, at));
    assert.ok(!holds({ ...at, offset: 99 }, at));
    assert.ok(!holds({ ...at, generation: '0000000000000000', index: 9 }, at), 'another generation holds nothing of this one');
  });
});
