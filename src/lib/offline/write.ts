import { readFile, rm } from 'node:fs/promises';
import { LicenseServerError } from '../errors.js';
import { describeFsError } from '../fs-errors.js';
import { writeFileDurably } from '../files/durable-write.js';
import { verifyLicenseFile } from './verify.js';

export interface WriteLicenseFileOptions {
  readonly publicKey: Uint8Array;
  readonly hardwareId?: string;
  readonly overwrite?: boolean;
  readonly now?: Date;
}

/**
 * Writes a checked-out file for someone who will carry it away (a USB stick to an
 * air-gapped site): durably, then read back from the device's file and verified as the
 * client will verify it. Returns only when the file on disk is complete and valid; when it
 * is not, the file is removed and FILE_WRITE_FAILED names what was wrong.
 */
export async function writeLicenseFile(target: string, licenseFile: string, options: WriteLicenseFileOptions): Promise<void> {
  await writeFileDurably(target, licenseFile, { overwrite: options.overwrite });
  const reject = async (reason: string): Promise<never> => {
    await rm(target, { force: true }).catch(() => undefined);
    throw new LicenseServerError('FILE_WRITE_FAILED', `${target} did not read back correctly (${reason}); it has been removed`);
  };
  let readBack: Buffer;
  try {
    readBack = await readFile(target);
  } catch (error) {
    return reject(describeFsError(error));
  }
  if (!readBack.equals(Buffer.from(licenseFile, 'utf8'))) return reject('its bytes differ from what was written');
  try {
    // A machine-key file's key opens only on its machine; the rest is checked as a client will.
    verifyLicenseFile(readBack, { publicKey: options.publicKey, hardwareId: options.hardwareId, now: options.now, leaveMachineKeySealed: true });
  } catch (error) {
    return reject(error instanceof Error ? error.message : String(error));
  }
}
