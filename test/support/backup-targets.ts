import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sshdProblem, startSshd } from './sshd.js';

/**
 * A real place to copy backups to, of one target kind, as a config.yaml entry (without its
 * name) plus the environment its credentials come from. The command tests and the disaster
 * test run against every kind listed in TARGET_KINDS.
 */
export interface TargetPlace {
  readonly entry: Record<string, unknown>;
  readonly env: Record<string, string>;
  /** Makes the place unusable as an outage would (stopped, unmounted): copies to it fail. */
  breakIt(): Promise<void>;
  /** Undoes breakIt. */
  mendIt(): Promise<void>;
  /** Everything the place holds, debris included (temporary names; incomplete uploads as `upload:<key>`), read without the target's code. */
  raw(): Promise<string[]>;
  stop(): Promise<void>;
}

export interface TargetKindFixture {
  readonly kind: 'file' | 'sftp' | 's3';
  /** Why this kind's server cannot run here, or undefined (see requireKind). */
  problem?(): string | undefined;
  start(): Promise<TargetPlace>;
}

/**
 * For a suite's before(): under CI=true a kind whose server cannot run here fails the suite,
 * never skips it; elsewhere the suite is skipped, loudly.
 */
export function requireKind(context: Mocha.Context, kind: TargetKindFixture): void {
  const problem = kind.problem?.();
  if (!problem) return;
  if (process.env.CI === 'true') throw new Error(`the ${kind.kind} target's server is required under CI=true: ${problem}`);
  console.warn(`    (skipping: ${problem})`);
  context.skip();
}

export const fileKind: TargetKindFixture = {
  kind: 'file',
  async start() {
    const root = mkdtempSync(path.join(tmpdir(), 'license-target-file-'));
    const directory = path.join(root, 'nas');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(directory);
    return {
      entry: { kind: 'file', path: directory },
      env: {},
      // An unmounted NAS: the mount point's directory is not there.
      async breakIt() {
        const { renameSync } = await import('node:fs');
        renameSync(directory, `${directory}.away`);
      },
      async mendIt() {
        const { renameSync } = await import('node:fs');
        renameSync(`${directory}.away`, directory);
      },
      async raw() {
        const { readdirSync } = await import('node:fs');
        return readdirSync(directory);
      },
      async stop() {
        rmSync(root, { recursive: true, force: true });
      },
    };
  },
};

/**
 * A bucket on the suite's S3-compatible server (test/support/s3-server.ts: s3rver behind a
 * front that checks every SigV4 signature), under a prefix, credentials from the environment.
 * Broken by stopping the server, mended by starting another on the same port and store.
 */
export const s3Kind: TargetKindFixture = {
  kind: 's3',
  async start() {
    const { startS3Server } = await import('./s3-server.js');
    const { S3Client, ListObjectsV2Command, ListMultipartUploadsCommand } = await import('@aws-sdk/client-s3');
    const server = await startS3Server();
    const bucket = `lic-${Math.random().toString(16).slice(2, 10)}`;
    await server.createBucket(bucket);
    const prefix = 'prod/license-server';
    const direct = () => new S3Client({
      endpoint: server.endpoint, region: server.region, forcePathStyle: true, credentials: server.credentials,
      requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED',
    });
    return {
      entry: { kind: 's3', endpoint: server.endpoint, region: server.region, bucket, prefix, path_style: true, part_size_mib: 5, timeout: 5, access_key_id_env: 'TEST_S3_KEY_ID', secret_access_key_env: 'TEST_S3_SECRET' },
      env: { TEST_S3_KEY_ID: server.credentials.accessKeyId, TEST_S3_SECRET: server.credentials.secretAccessKey },
      async breakIt() {
        server.setDown(true);
      },
      async mendIt() {
        server.setDown(false);
      },
      async raw() {
        const client = direct();
        try {
          const root = `${prefix}/`;
          const names: string[] = [];
          let token: string | undefined;
          do {
            const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: root, ContinuationToken: token }));
            names.push(...(page.Contents ?? []).map(({ Key }) => Key!.slice(root.length)));
            token = page.NextContinuationToken;
          } while (token);
          const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: root }));
          names.push(...(uploads.Uploads ?? []).map(({ Key }) => `upload:${Key!.slice(root.length)}`));
          return names;
        } finally {
          client.destroy();
        }
      },
      async stop() {
        await server.stop();
      },
    };
  },
};

/**
 * A directory on Debian's real OpenSSH sshd (test/support/sshd.ts) on a loopback port, its
 * host key pinned by fingerprint, the client key in a file. Broken by freezing the listening
 * sshd (SIGSTOP): connections are accepted by the kernel and never answered, as a hung server's.
 */
export const sftpKind: TargetKindFixture = {
  kind: 'sftp',
  problem: sshdProblem,
  async start() {
    const sshd = await startSshd();
    const root = mkdtempSync(path.join(tmpdir(), 'license-target-sftp-'));
    const keyFile = path.join(root, 'id_ed25519');
    const { writeFileSync, readdirSync } = await import('node:fs');
    writeFileSync(keyFile, sshd.privateKey, { mode: 0o600 });
    return {
      entry: { kind: 'sftp', host: sshd.host, port: sshd.port, user: sshd.user, path: sshd.directory, private_key_file: keyFile, host_key_fingerprint: sshd.hostKeyFingerprint, timeout: 5 },
      env: {},
      async breakIt() {
        process.kill(sshd.pid, 'SIGSTOP');
      },
      async mendIt() {
        process.kill(sshd.pid, 'SIGCONT');
      },
      async raw() {
        return readdirSync(sshd.localDirectory);
      },
      async stop() {
        try {
          process.kill(sshd.pid, 'SIGCONT');
        } catch {
          // already gone
        }
        await sshd.stop();
        rmSync(root, { recursive: true, force: true });
      },
    };
  },
};

export const TARGET_KINDS: readonly TargetKindFixture[] = [fileKind, sftpKind, s3Kind];
