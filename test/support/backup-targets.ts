import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

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
  start(): Promise<TargetPlace>;
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

export const TARGET_KINDS: readonly TargetKindFixture[] = [fileKind];
