import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { hkdfSync, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { bech32 } from '@scure/base';
import { scaledMs } from './busy-machine.js';
import { api, type ServeProcess } from './serve.js';

const run = promisify(execFile);

/** Where an s3 target's replica is, and the key that reads it. */
export interface S3Replica {
  readonly endpoint: string;
  readonly region: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/**
 * What the replication tests share (issue 37): a daemon replicating to a file target, its
 * replication status, and the restore by hand of docs/replication.md, which reads the replica
 * the way an operator without this tool would: the age identity made from the backup key as
 * the document derives it (node:crypto here, not the tool's code), a Litestream configuration
 * of its own, `litestream restore`, `PRAGMA integrity_check`.
 */
export function replicationFixture(options: { readonly work: () => string; readonly litestream: () => string }) {
  const backupKey = randomBytes(32);
  const targetDir = () => path.join(options.work(), 'offsite');
  const fixture = {
    backupKey,
    targetDir,
    environment: (extra: Record<string, string> = {}): Record<string, string> => ({
      LICENSE_BACKUP_ENCRYPTION_KEY: backupKey.toString('hex'),
      LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'offsite', kind: 'file', path: targetDir() }]),
      LICENSE_BACKUP_REPLICATION_TARGETS: 'offsite',
      ...extra,
    }),
    databaseOf: (serve: ServeProcess): string => /\(database: sqlite (\S+)\)/.exec(serve.stdout())![1]!,
    async status(serve: ServeProcess): Promise<any> {
      const answer = await api(serve.url, 'GET', '/api/backups/status', { token: serve.token! });
      assert.equal(answer.status, 200, answer.text);
      return answer.body.replication;
    },
    /**
     * Until the replica holds every write acknowledged before this call, as docs/replication.md
     * says to tell: Litestream read the WAL after it, and the replica caught up after that.
     */
    async caughtUp(serve: ServeProcess): Promise<any> {
      const since = new Date().toISOString();
      const deadline = Date.now() + scaledMs(20_000);
      for (;;) {
        const last = await fixture.status(serve);
        const replica = last.replicas[0];
        if (last.state === 'replicating' && replica.lag_seconds === 0 && last.local_synced_at > since && replica.caught_up_at > last.local_synced_at) return last;
        if (Date.now() > deadline) assert.fail(`the replica did not catch up: ${JSON.stringify(last)}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    },
    /** Until the process is gone (or a zombie). */
    async gone(pid: number, what: string): Promise<void> {
      const deadline = Date.now() + scaledMs(15_000);
      while (existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z')) {
        if (Date.now() > deadline) assert.fail(`${what} (pid ${pid}) still runs`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    /** docs/replication.md, "Restoring by hand with Litestream", steps 1-4: the restored file's path. */
    async restoreByHand(databasePath: string, timestamp?: string, s3?: S3Replica): Promise<string> {
      const scalar = Buffer.from(hkdfSync('sha256', backupKey, 'license-server replication', 'age X25519 identity v1', 32));
      const identity = bech32.encode('age-secret-key-', bech32.toWords(scalar), false).toUpperCase();
      const config = path.join(options.work(), 'restore.yml');
      // Step 2: the replica as docs/replication.md writes it for a file target, or for s3.
      const replica = s3
        ? ['      - type: s3', `        bucket: ${s3.bucket}`, `        path: ${s3.prefix}/replica`, `        endpoint: ${s3.endpoint}`, `        region: ${s3.region}`, '        force-path-style: true']
        : ['      - type: file', `        path: ${JSON.stringify(path.join(targetDir(), 'replica'))}`];
      writeFileSync(config, ['dbs:', `  - path: ${JSON.stringify(databasePath)}`, '    replicas:', ...replica, '        age:', "          identities: ['${AGE_IDENTITY}']", ''].join('\n'));
      const output = path.join(options.work(), `restored-${randomBytes(4).toString('hex')}.db`);
      const credentials = s3 ? { LITESTREAM_ACCESS_KEY_ID: s3.accessKeyId, LITESTREAM_SECRET_ACCESS_KEY: s3.secretAccessKey } : {};
      await run(options.litestream(), ['restore', '-config', config, ...(timestamp ? ['-timestamp', timestamp] : []), '-o', output, databasePath], { env: { AGE_IDENTITY: identity, ...credentials } });
      const { stdout: integrity } = await run('sqlite3', [output, 'PRAGMA integrity_check']);
      assert.equal(integrity.trim(), 'ok');
      return output;
    },
    /** One column of a query on a restored file, a line per row. */
    async column(file: string, sql: string): Promise<string[]> {
      const { stdout } = await run('sqlite3', [file, sql], { maxBuffer: 64 * 1024 * 1024 });
      return stdout.split('\n').filter((line) => line !== '');
    },
  };
  return fixture;
}
