import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { LicenseServerError } from '../errors.js';

/** The Litestream line whose replica layout, flags and metrics this tool was built and tested against. */
export const LITESTREAM_LINE = /^v0\.3\.\d+$/;

/**
 * The Litestream binary to run: the one named, or the one npm installed for this platform
 * on Linux x64 (@flydotio/litestream-linux-x64, an optional dependency; npm has no other
 * build: @flydotio/litestream names an arm64 one that was never published). Its version is checked,
 * since 0.5 changed the replica layout and dropped age encryption.
 */
export async function findLitestream(named: string | undefined): Promise<{ readonly binary: string; readonly version: string }> {
  const binary = named ?? installedBinary();
  const version = await new Promise<string>((resolve, reject) => {
    execFile(binary, ['version'], { timeout: 10_000, env: {} }, (error, stdout) => {
      if (error) reject(unavailable(`cannot run Litestream at ${binary}: ${(error as NodeJS.ErrnoException).code ?? error.message.slice(0, 120)}`));
      else resolve(stdout.trim());
    });
  });
  if (!LITESTREAM_LINE.test(version)) throw unavailable(`${binary} is Litestream ${version.slice(0, 40)}; this release replicates with Litestream 0.3`);
  return { binary, version };
}

function installedBinary(): string {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw unavailable(`no Litestream binary is installed for ${process.platform}-${process.arch}; install Litestream 0.3 and name it in LICENSE_LITESTREAM_BIN`);
  }
  try {
    const manifest = createRequire(import.meta.url).resolve('@flydotio/litestream-linux-x64/package.json');
    return path.join(path.dirname(manifest), 'litestream');
  } catch {
    throw unavailable(`@flydotio/litestream-linux-x64 is not installed (npm leaves optional dependencies out with --omit=optional); install it, or name a Litestream 0.3 binary in LICENSE_LITESTREAM_BIN`);
  }
}

function unavailable(message: string): LicenseServerError {
  return new LicenseServerError('REPLICATION_UNAVAILABLE', message);
}
