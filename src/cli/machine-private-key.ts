import { readFileSync } from 'node:fs';
import { LicenseServerError } from '../lib/errors.js';
import { parseMachinePrivateKey } from '../lib/offline/machine-key.js';
import { describeFsError } from '../lib/fs-errors.js';

/** `--machine-private-key FILE`: the machine's X25519 private key, as parseMachinePrivateKey reads it. */
export function readMachinePrivateKeyFile(file: string): Uint8Array {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new LicenseServerError('FILE_UNREADABLE', `cannot read the machine private key ${file}: ${describeFsError(error)}`);
  }
  return parseMachinePrivateKey(text, file);
}
