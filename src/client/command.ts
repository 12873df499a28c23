/**
 * `license-server-client`: the two steps of activation by request file on an air-gapped
 * machine (docs/client.md, "Activation by request file"), for a vendor to ship beside the
 * application or call from its installer. No secret on the command line: the license key
 * comes from a file or the environment.
 *
 *   license-server-client request --license-key-file F --out FILE [--cache-dir D]
 *   license-server-client install FILE --license-file PATH --public-key PEM --license-key-file F [--cache-dir D]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseKeySet } from '../lib/crypto/key-set.js';
import { isLicenseServerError } from '../lib/errors.js';
import { writeFileDurably } from '../lib/files/durable-write.js';
import { describeFsError } from '../lib/fs-errors.js';
import { parseHardwareId } from '../lib/offline/binding.js';
import { createActivationRequest, installLicenseFile, type ActivationContext } from './activation.js';
import { findPreviousHardwareId } from './previous-hardware-id.js';
import { LicenseClientError } from './errors.js';
import { deriveHardwareId } from './hardware-id.js';
import { defaultCacheDir, LicenseClientConfigError, systemClock } from './options.js';
import { ClientStore } from './store.js';

/** The environment variable that may hold the license key instead of --license-key-file. */
export const LICENSE_KEY_ENV = 'LICENSE_SERVER_LICENSE_KEY';

const USAGE = `Usage:
  license-server-client request --license-key-file FILE --out REQUEST [--cache-dir DIR]
                               [--hardware-id ID] [--machine-name NAME] [--app-version V] [--force]
  license-server-client install LICENSE.lic --license-file PATH --public-key PEM
                               --license-key-file FILE [--cache-dir DIR] [--hardware-id ID]

The license key is read from --license-key-file, or from $${LICENSE_KEY_ENV}; never from the command line.
request writes the activation request (--out - for standard output) and keeps its private key
in the cache directory; install checks that LICENSE.lic answers that request and puts it at
--license-file.`;

class UsageError extends Error {}

const OPTIONS = {
  'license-key-file': { type: 'string' },
  'cache-dir': { type: 'string' },
  'hardware-id': { type: 'string' },
  out: { type: 'string' },
  force: { type: 'boolean' },
  'machine-name': { type: 'string' },
  'app-version': { type: 'string' },
  'license-file': { type: 'string' },
  'public-key': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  try {
    if (command === 'request') return await request(values, rest, env);
    if (command === 'install') return await install(values, rest, env);
    return usage(`unknown command "${command}"`);
  } catch (error) {
    if (error instanceof UsageError) return usage(error.message);
    const code = error instanceof LicenseClientError || isLicenseServerError(error) ? error.code : error instanceof LicenseClientConfigError ? 'CONFIG' : 'INTERNAL';
    process.stderr.write(`Error: ${code}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

type Values = { readonly [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'boolean' ? boolean | undefined : string | undefined };

async function request(values: Values, rest: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (rest.length > 0) throw new UsageError(`request takes no arguments, got "${rest[0]}"`);
  if (!values.out) throw new UsageError('request needs --out FILE (or --out - for standard output)');
  const context = activationContext(values, env);
  const { text, request: made } = await createActivationRequest(context, {
    ...(values['machine-name'] === undefined ? {} : { machineName: values['machine-name'] }),
    ...(values['app-version'] === undefined ? {} : { appVersion: values['app-version'] }),
  });
  if (values.out === '-') {
    process.stdout.write(text);
    return 0;
  }
  await writeFileDurably(values.out, text, { overwrite: values.force === true });
  process.stdout.write(`Wrote ${values.out}: activation request ${made.nonce} of ${made.created_at} for hardware ID ${JSON.stringify(made.hardware_id)}.\n`);
  process.stdout.write('Carry it to the license server\'s operator (license-server license checkout LICENSE --request FILE), then install the .lic file they give back with license-server-client install.\n');
  return 0;
}

async function install(values: Values, rest: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (rest.length !== 1) throw new UsageError('install takes one argument: the .lic file');
  if (!values['license-file']) throw new UsageError('install needs --license-file PATH: where the application reads its .lic file');
  if (!values['public-key']) throw new UsageError('install needs --public-key PEM: the server\'s public key (set)');
  const file = readArgumentFile(rest[0]!, 'the license file');
  const pem = readArgumentFile(values['public-key'], 'the public key');
  const keySet = parseKeySet(pem.toString('utf8'), values['public-key']);
  const context = { ...activationContext(values, env), licenseFile: values['license-file'], keySet: async () => keySet };
  const result = await installLicenseFile(context, file);
  process.stdout.write(`Installed ${result.file}: license ${result.licenseId}, valid until ${result.validUntil}, bound to ${JSON.stringify(result.hardwareId)}, answering request ${result.requestNonce}.\n`);
  return 0;
}

function activationContext(values: Values, env: NodeJS.ProcessEnv): ActivationContext {
  const licenseKey = readLicenseKey(values, env);
  const cacheDir = values['cache-dir'] ?? defaultCacheDir();
  const hardwareId = values['hardware-id'] === undefined ? deriveHardwareId() : parseHardwareId(values['hardware-id']);
  const store = new ClientStore(cacheDir, licenseKey);
  return {
    store,
    licenseKey,
    version: values['app-version'] ?? 'license-server-client',
    hardwareId,
    cacheDir,
    licenseFile: undefined,
    clock: systemClock,
    keySet: async () => undefined,
    // The application's cache directory: the hw1 ID it remembers, as the client would find it.
    previousHardwareId: () => findPreviousHardwareId(
      { hardwareId, derived: values['hardware-id'] === undefined, store, offlineEnabled: true, licenseFile: values['license-file'] },
      (write) => write().then(() => true, () => false),
    ).catch(() => undefined),
  };
}

function readLicenseKey(values: Values, env: NodeJS.ProcessEnv): string {
  const fromFile = values['license-key-file'];
  const key = fromFile === undefined ? env[LICENSE_KEY_ENV] : readArgumentFile(fromFile, 'the license key file').toString('utf8');
  if (key === undefined || key.trim() === '') {
    throw new UsageError(fromFile === undefined ? `the license key is needed: --license-key-file FILE, or $${LICENSE_KEY_ENV}` : `${fromFile} holds no license key`);
  }
  return key.trim();
}

function readArgumentFile(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new UsageError(`cannot read ${what} ${file}: ${describeFsError(error)}`);
  }
}

function usage(message: string): number {
  process.stderr.write(`Error: ${message}\n${USAGE}\n`);
  return 2;
}

