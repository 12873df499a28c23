import { readFile } from 'node:fs/promises';
import { LicenseServerError } from '../../errors.js';
import { describeFsError } from '../../fs-errors.js';
import { openFileTarget } from './file.js';
import type { CredentialSource, TargetSettings } from './settings.js';
import { TargetError, type BackupTarget } from './target.js';

/**
 * Opens a configured target: reads its credentials from where the settings name them (an
 * environment variable, a file) now, not when the configuration was read, so that commands
 * that use no target never need them. `env` is the configuration's (ResolvedConfig.env).
 * The kinds' clients load only when used.
 */
export async function openTarget(settings: TargetSettings, env: Readonly<Record<string, string | undefined>>): Promise<BackupTarget> {
  switch (settings.kind) {
    case 'file':
      return openFileTarget({ name: settings.name, directory: settings.path });
    case 's3': {
      const [{ openS3Target }, accessKeyId, secretAccessKey, sessionToken] = await Promise.all([
        import('./s3.js'),
        readCredential(settings.name, 'the access key id', settings.accessKeyId, env),
        readCredential(settings.name, 'the secret access key', settings.secretAccessKey, env),
        settings.sessionToken ? readCredential(settings.name, 'the session token', settings.sessionToken, env) : undefined,
      ]);
      return openS3Target({
        name: settings.name,
        ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
        region: settings.region,
        bucket: settings.bucket,
        prefix: settings.prefix,
        pathStyle: settings.pathStyle,
        ...(settings.serverSideEncryption === 'AES256' ? { serverSideEncryption: { kind: 'AES256' as const } } : {}),
        ...(settings.serverSideEncryption === 'aws:kms' ? { serverSideEncryption: { kind: 'aws:kms' as const, ...(settings.kmsKeyId ? { keyId: settings.kmsKeyId } : {}) } } : {}),
        credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) },
        timeoutSeconds: settings.timeoutSeconds,
        partSize: settings.partSizeMiB * 1024 * 1024,
      });
    }
    case 'sftp': {
      const readKeyFile = (what: string, file: string) =>
        readFile(file).catch((error: unknown) => {
          throw new TargetError(settings.name, what === 'the known_hosts file' ? 'host-key' : 'auth', `${what} is to come from ${file}, which cannot be read: ${describeFsError(error)}`);
        });
      const [{ openSftpTarget }, privateKey, passphrase, knownHosts] = await Promise.all([
        import('./sftp.js'),
        readKeyFile('the private key', settings.privateKeyFile),
        settings.passphrase ? readCredential(settings.name, 'the private key\'s passphrase', settings.passphrase, env) : undefined,
        settings.knownHostsFile ? readKeyFile('the known_hosts file', settings.knownHostsFile) : undefined,
      ]);
      return openSftpTarget({
        name: settings.name,
        host: settings.host,
        port: settings.port,
        user: settings.user,
        privateKey,
        ...(passphrase === undefined ? {} : { passphrase }),
        hostKey: knownHosts ? { knownHosts: knownHosts.toString('utf8') } : { fingerprints: settings.hostKeyFingerprints },
        directory: settings.path,
        timeoutSeconds: settings.timeoutSeconds,
      });
    }
  }
}

/** The targets named in `names` (all when undefined), or TARGET_NOT_CONFIGURED for a name that is none of them. */
export function selectTargets(all: readonly TargetSettings[], names?: readonly string[]): TargetSettings[] {
  if (names === undefined) return [...all];
  return names.map((name) => {
    const found = all.find((target) => target.name === name);
    if (!found) {
      throw new LicenseServerError('TARGET_NOT_CONFIGURED', all.length === 0
        ? `no off-site target is configured (backup.targets), so there is no target ${JSON.stringify(name.slice(0, 40))}`
        : `no target is named ${JSON.stringify(name.slice(0, 40))}; the targets are ${all.map((target) => target.name).join(', ')}`);
    }
    return found;
  });
}

/** A credential's value. Its absence is the target's 'auth' failure; the value never appears in a message. */
export async function readCredential(target: string, what: string, source: CredentialSource, env: Readonly<Record<string, string | undefined>>): Promise<string> {
  if ('env' in source) {
    const value = env[source.env];
    if (value === undefined || value === '') throw new TargetError(target, 'auth', `${what} is to come from the environment variable ${source.env}, which is not set`);
    return value;
  }
  try {
    const value = (await readFile(source.file, 'utf8')).trim();
    if (value === '') throw new TargetError(target, 'auth', `${what} is to come from ${source.file}, which is empty`);
    return value;
  } catch (error) {
    if (error instanceof TargetError) throw error;
    throw new TargetError(target, 'auth', `${what} is to come from ${source.file}, which cannot be read: ${describeFsError(error)}`);
  }
}
